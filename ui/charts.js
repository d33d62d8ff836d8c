/* The Activity panel (DESIGN §21): the last hour per minute from GET /v1/boards/{b}/activity —
 * claims, completions, failures and reaper actions as bar charts, and the board's cards per
 * column as stacked bars — drawn as inline SVG built here (no framework, no CDN, no inline
 * style: colours are SVG attributes and app.css classes). The numbers are this board's on
 * this replica, kept in its memory since it started (or since counts_since). Loaded after
 * board.js; shares app.js's scope. */
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';
const CHART_W = 340;
const CHART_H = 56;
const SERIES = [
  ['claims', 'Claims'],
  ['completions', 'Completions (runs finished)'],
  ['failures', 'Failures (runs failed)'],
  ['reaper_actions', 'Reaper actions'],
];
/* One colour per column, in board order (cycled past ten). */
const COLUMN_COLOURS = ['#5b8def', '#9aa5b1', '#f0b429', '#8e6bd1', '#2f9e8f', '#e8743b',
  '#c2549d', '#3f9c35', '#d64545', '#6b7785'];

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  for (const kid of kids.flat()) if (kid) el.append(kid);
  return el;
}

function minuteText(iso) {
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hour12: false });
}

function sum(a) {
  return (a || []).reduce((s, v) => s + (typeof v === 'number' ? v : 0), 0);
}

/* The x axis under a chart: how far back the window starts, and "now". */
function axis(minutes, y) {
  return svg('g', { class: 'axis' },
    svg('text', { x: 0, y, 'text-anchor': 'start' }, document.createTextNode(minutes.length ? minutes.length + ' min ago' : '')),
    svg('text', { x: CHART_W, y, 'text-anchor': 'end' }, document.createTextNode('now')));
}

/* A bar per minute of `values` (numbers), scaled to the window's largest. */
function barChart(name, values, minutes, label) {
  const n = values.length || 1;
  const max = Math.max(1, ...values);
  const w = CHART_W / n;
  const bars = values.map((v, k) => {
    const bh = v ? Math.max(1.5, (v / max) * CHART_H) : 0;
    return svg('rect', { x: (k * w).toFixed(2), y: (CHART_H - bh).toFixed(2), width: Math.max(1, w - 1).toFixed(2),
      height: bh.toFixed(2), class: 'bar-' + name, 'data-minute': minutes[k], 'data-value': v },
    svg('title', null, document.createTextNode(minuteText(minutes[k]) + ': ' + v + ' ' + label.toLowerCase())));
  });
  return svg('svg', { viewBox: '0 0 ' + CHART_W + ' ' + (CHART_H + 14), width: CHART_W, height: CHART_H + 14,
    role: 'img', 'aria-label': label + ': ' + sum(values) + ' in the last ' + values.length + ' min, at most ' + Math.max(0, ...values) + ' a minute',
    'data-series': name, 'data-total': sum(values), 'data-max': Math.max(0, ...values) },
  svg('line', { x1: 0, y1: CHART_H + 0.5, x2: CHART_W, y2: CHART_H + 0.5, class: 'baseline' }),
  bars, axis(minutes, CHART_H + 12));
}

/* Cards per column: a stacked bar per sampled minute (a minute nobody read is a gap). */
function columnsChart(columns, minutes) {
  const n = minutes.length || 1;
  const w = CHART_W / n;
  const H = CHART_H * 1.5;
  let max = 1;
  for (let k = 0; k < n; k++) max = Math.max(max, columns.reduce((s, c) => s + (c.cards[k] || 0), 0));
  const parts = [];
  for (let k = 0; k < n; k++) {
    let y = H;
    columns.forEach((c, i) => {
      const v = c.cards[k];
      if (typeof v !== 'number' || !v) return;
      const bh = (v / max) * H;
      y -= bh;
      parts.push(svg('rect', { x: (k * w).toFixed(2), y: y.toFixed(2), width: Math.max(1, w - 1).toFixed(2), height: bh.toFixed(2),
        fill: COLUMN_COLOURS[i % COLUMN_COLOURS.length], 'data-column': c.name, 'data-minute': minutes[k], 'data-value': v },
      svg('title', null, document.createTextNode(minuteText(minutes[k]) + ': ' + v + ' in ' + c.name))));
    });
  }
  const last = (c) => { for (let k = c.cards.length - 1; k >= 0; k--) if (typeof c.cards[k] === 'number') return c.cards[k]; return null; };
  const legend = h('ul', { class: 'legend' }, columns.map((c, i) => h('li', { 'data-column': c.name, 'data-now': last(c) },
    svg('svg', { width: 10, height: 10, 'aria-hidden': 'true' }, svg('rect', { width: 10, height: 10, fill: COLUMN_COLOURS[i % COLUMN_COLOURS.length] })),
    ' ' + c.name + ' ' + (last(c) === null ? '–' : last(c)))));
  const chart = svg('svg', { viewBox: '0 0 ' + CHART_W + ' ' + (H + 14), width: CHART_W, height: H + 14, role: 'img',
    'aria-label': 'Cards per column, sampled at the start of each minute', 'data-series': 'columns' },
  svg('line', { x1: 0, y1: H + 0.5, x2: CHART_W, y2: H + 0.5, class: 'baseline' }), parts, axis(minutes, H + 12));
  return [chart, legend];
}

async function loadActivity() {
  const board = S.board;
  if (!board) return;
  let a;
  try {
    a = await api('GET', '/v1/boards/' + enc(board.name) + '/activity');
  } catch (e) {
    a = { error: problemText(e) };
  }
  if (S.board !== board) return; /* another board (or none) opened meanwhile */
  S.activity = a;
  renderActivity();
}

function renderActivitySummary() {
  const a = S.activity;
  let text = '';
  if (!a) text = '';
  else if (a.error) text = a.error;
  else if (!a.series || a.series.claims === null) text = 'cards per column, last hour';
  else text = 'last hour: ' + sum(a.series.claims) + ' claims · ' + sum(a.series.completions) + ' done · ' +
    sum(a.series.failures) + ' failed · ' + sum(a.series.reaper_actions) + ' reaper';
  $('activity-summary').textContent = text;
  $('activity-toggle').classList.toggle('warn', !!(a && a.error));
}

function renderActivity() {
  renderActivitySummary();
  const a = S.activity;
  const out = [];
  if (!a) {
    out.push(h('p', { class: 'muted', text: 'loading…' }));
  } else if (a.error) {
    out.push(h('p', { class: 'error', text: a.error }));
  } else {
    const minutes = a.minutes || [];
    for (const [name, label] of SERIES) {
      const values = a.series ? a.series[name] : null;
      if (!Array.isArray(values)) continue;
      out.push(h('figure', { class: 'chart', 'data-chart': name },
        h('figcaption', null, h('strong', { text: label }), h('span', { class: 'muted', text: ' ' + sum(values) + ' · at most ' + Math.max(0, ...values) + '/min' })),
        barChart(name, values, minutes, label)));
    }
    if (a.columns && a.columns.length) {
      out.push(h('figure', { class: 'chart', 'data-chart': 'columns' },
        h('figcaption', null, h('strong', { text: 'Cards per column' })), columnsChart(a.columns, minutes)));
    }
    out.push(h('p', { class: 'muted small' }, 'This board\'s counts on this server',
      a.counts_since ? [' since ', timeEl(a.counts_since, 'ago')] : '', ' (per replica, in memory).'));
  }
  $('activity-charts').replaceChildren(...out);
}
