// BullMQ's side of bench/peers_drain.sh (issue 28): N no-op jobs added in bulk to an empty
// queue before the clock starts, then ONE Worker at concurrency C drains them; the rate is
// N / (worker start -> Nth 'completed' event). Per job: the processor's start -> its
// 'completed' event, which BullMQ emits after moveToFinished (the Lua script that marks the
// job completed and hands the worker its next job) has been answered by Redis. Stock
// options otherwise (completed jobs kept, locks, stalled checks). Prints one line and a
// RESULT line; asserts nothing. Run by peers_drain.sh with NODE_PATH at the pinned install.
//
//   REDIS_PORT=P JOBS=10000 CONCURRENCY=32 LABEL=always node bench/bullmq_drain.cjs
'use strict';
const { Queue, Worker } = require('bullmq');
const { performance } = require('perf_hooks');

const port = Number(process.env.REDIS_PORT);
const n = Number(process.env.JOBS || 10000);
const conc = Number(process.env.CONCURRENCY || 32);
const label = process.env.LABEL || 'bullmq';
const limitS = Number(process.env.LIMIT_S || 600); // the drain gives up after this
const bulk = 1000; // jobs per addBulk

function quantile(sorted, q) {
	if (!sorted.length) return NaN;
	return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function main() {
	if (!port || n < 1 || conc < 1) {
		console.error('bullmq_drain: REDIS_PORT, JOBS >= 1 and CONCURRENCY >= 1 are needed');
		process.exit(2);
	}
	const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
	const queue = new Queue('drain', { connection });
	await queue.waitUntilReady();
	await queue.obliterate({ force: true });
	for (let i = 0; i < n; i += bulk) {
		const k = Math.min(bulk, n - i);
		await queue.addBulk(Array.from({ length: k }, (_, j) => ({ name: 'noop', data: { i: i + j } })));
	}
	const waiting = await queue.getWaitingCount();

	const started = new Map();
	const lat = new Float64Array(n);
	let done = 0, failed = 0, t0 = 0, t1 = 0, finish;
	const finished = new Promise((resolve) => { finish = resolve; });
	const worker = new Worker('drain', async (job) => { started.set(job.id, performance.now()); },
		{ connection, concurrency: conc, autorun: false });
	worker.on('completed', (job) => {
		const now = performance.now();
		const s = started.get(job.id);
		started.delete(job.id);
		if (done < n) lat[done] = now - s;
		if (++done === n) { t1 = now; finish(); }
	});
	worker.on('failed', () => { if (++failed + done >= n) { t1 = performance.now(); finish(); } });
	worker.on('error', (err) => console.error(`bullmq_drain: worker error: ${err.message}`));
	await worker.waitUntilReady();
	t0 = performance.now();
	worker.run();
	const timer = setTimeout(() => { t1 = performance.now(); finish(); }, limitS * 1000);
	await finished;
	clearTimeout(timer);
	await worker.close();
	const counts = await queue.getJobCounts('completed', 'failed', 'wait', 'active');
	await queue.close();

	const secs = (t1 - t0) / 1000;
	const sorted = Array.from(lat.subarray(0, Math.min(done, n))).sort((a, b) => a - b);
	const rate = done / secs;
	const p50 = quantile(sorted, 0.5), p99 = quantile(sorted, 0.99), max = sorted[sorted.length - 1];
	console.log(`bullmq ${label}: jobs ${done}/${n} (queued ${waiting}) concurrency ${conc}  ` +
		`${rate.toFixed(0)} jobs/s  p50 ${p50.toFixed(2)} ms  p99 ${p99.toFixed(2)} ms  ` +
		`max ${max.toFixed(2)} ms  failed ${failed}  (${secs.toFixed(2)} s; Redis counts: ` +
		`completed ${counts.completed}, failed ${counts.failed}, wait ${counts.wait}, active ${counts.active})`);
	console.log(`RESULT side=bullmq-${label} jobs=${done} jobs_per_s=${rate.toFixed(1)} ` +
		`p99_ms=${p99.toFixed(2)} failed=${failed}`);
	process.exit(done === n && failed === 0 ? 0 : 1);
}

main().catch((err) => { console.error(`bullmq_drain: ${err.stack || err}`); process.exit(1); });
