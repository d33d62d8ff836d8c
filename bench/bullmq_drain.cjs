// BullMQ's side of bench/peers_drain.sh (issue 28): N no-op jobs added in bulk to an empty
// queue before the clock starts, then ONE Worker at concurrency C drains them; the rate is
// N / (worker start -> Nth 'completed' event). Per job: the processor's start -> its
// 'completed' event, which BullMQ emits after moveToFinished (the Lua script that marks the
// job completed and hands the worker its next job) has been answered by Redis. Stock
// options otherwise (completed jobs kept, locks, stalled checks). Prints one line and a
// RESULT line; asserts nothing. CPU per job over the same window: Redis's own (INFO cpu,
// used_cpu_user + used_cpu_sys) and this worker process's (process.cpuUsage). Run by
// peers_drain.sh with NODE_PATH at the pinned install.
//
//   REDIS_PORT=P JOBS=10000 CONCURRENCY=32 LABEL=always node bench/bullmq_drain.cjs
'use strict';
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');
const { performance } = require('perf_hooks');

const port = Number(process.env.REDIS_PORT);
const n = Number(process.env.JOBS || 10000);
const conc = Number(process.env.CONCURRENCY || 32);
const label = process.env.LABEL || 'bullmq';
const limitS = Number(process.env.LIMIT_S || 600); // the drain gives up after this
const bulk = 1000; // jobs per addBulk

async function redisCpuS(r) { // Redis's own CPU seconds so far (all its threads)
	const info = await r.info('cpu');
	const v = (k) => Number((info.match(new RegExp(`^${k}:([0-9.]+)`, 'm')) || [])[1]);
	return v('used_cpu_user') + v('used_cpu_sys');
}

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
	const admin = new IORedis({ host: '127.0.0.1', port }); // its own connection, for INFO only
	const rcpu0 = await redisCpuS(admin), ncpu0 = process.cpuUsage();
	t0 = performance.now();
	worker.run();
	const timer = setTimeout(() => { t1 = performance.now(); finish(); }, limitS * 1000);
	await finished;
	clearTimeout(timer);
	const ncpu = process.cpuUsage(ncpu0), rcpu1 = await redisCpuS(admin);
	admin.disconnect();
	await worker.close();
	const counts = await queue.getJobCounts('completed', 'failed', 'wait', 'active');
	await queue.close();

	const secs = (t1 - t0) / 1000;
	const sorted = Array.from(lat.subarray(0, Math.min(done, n))).sort((a, b) => a - b);
	const rate = done / secs;
	const p50 = quantile(sorted, 0.5), p99 = quantile(sorted, 0.99), max = sorted[sorted.length - 1];
	const serverUs = done ? (rcpu1 - rcpu0) * 1e6 / done : NaN;
	const clientUs = done ? (ncpu.user + ncpu.system) / done : NaN;
	console.log(`bullmq ${label}: jobs ${done}/${n} (queued ${waiting}) concurrency ${conc}  ` +
		`${rate.toFixed(0)} jobs/s  p50 ${p50.toFixed(2)} ms  p99 ${p99.toFixed(2)} ms  ` +
		`max ${max.toFixed(2)} ms  failed ${failed}  (${secs.toFixed(2)} s; Redis counts: ` +
		`completed ${counts.completed}, failed ${counts.failed}, wait ${counts.wait}, active ${counts.active})`);
	console.log(`  redis cpu ${(rcpu1 - rcpu0).toFixed(2)} s: ${serverUs.toFixed(0)} us per job; ` +
		`worker (node) cpu ${((ncpu.user + ncpu.system) / 1e6).toFixed(2)} s: ${clientUs.toFixed(0)} us per job`);
	console.log(`RESULT side=bullmq-${label} jobs=${done} jobs_per_s=${rate.toFixed(1)} ` +
		`p99_ms=${p99.toFixed(2)} failed=${failed} server_us_per_job=${serverUs.toFixed(1)} ` +
		`client_us_per_job=${clientUs.toFixed(1)}`);
	process.exit(done === n && failed === 0 ? 0 : 1);
}

main().catch((err) => { console.error(`bullmq_drain: ${err.stack || err}`); process.exit(1); });
