// The Gantt chart of report.html: the jobs of one chosen run by GPU over time, coloured by a chosen field, with
// preemptions and failures marked; hovering a job shows its record, clicking it prints the whole record below.
// Reads the runs from the JSON in <script id="gantt-data"> (evaluation/report_charts.py: gantt_runs); each run's
// "jobs" is a job table (evaluation/jobs.py): columns of equal length, times in seconds.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("gantt-data").textContent);
  const runSelect = document.getElementById("gantt-run");
  const colourSelect = document.getElementById("gantt-colour");
  const detail = document.getElementById("gantt-detail");
  const palette = ["#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880",
    "#FF97FF", "#FECB52", "#1F77B4", "#8C564B", "#2CA02C", "#7F7F7F", "#BCBD22", "#17BECF", "#9467BD", "#D62728",
    "#E377C2", "#393B79", "#637939", "#8C6D31", "#843C39", "#7B4173"];

  function sizeGroup(jobs, i) {
    const n = jobs.n_gpus[i];
    if (jobs.gpu_share[i] < 1) return "a share of 1 GPU";
    if (n === 1) return "1 GPU";
    if (n <= 4) return "2-4 GPUs";
    if (n <= 8) return "5-8 GPUs";
    if (n <= 32) return "9-32 GPUs";
    return "over 32 GPUs";
  }

  function outcome(jobs, i) {
    if (jobs.state[i] !== "completed") return jobs.state[i];
    if (jobs.reason[i] === "timed out") return "timed out";
    if (jobs.preemptions[i] > 0 || jobs.failures[i] > 0) return "completed after an interruption";
    return "completed";
  }

  const FIELDS = {
    user: (jobs, i) => jobs.user[i],
    team: (jobs, i) => jobs.team[i],
    size: sizeGroup,
    priority: (jobs, i) => "priority " + jobs.priority[i],
    outcome: outcome,
  };

  function hours(seconds, origin) {
    return origin === Infinity ? 0 : (seconds - origin) / 3600;
  }

  function record(jobs, i) {
    const out = {};
    for (const key of Object.keys(jobs)) out[key] = jobs[key][i];
    return out;
  }

  function hoverText(jobs, i) {
    const fmt = (s) => (s === null ? "-" : s.toLocaleString(undefined, {maximumFractionDigits: 1}) + " s");
    return "job " + jobs.job_id[i] + " · user " + jobs.user[i] + " · team " + jobs.team[i] +
      "<br>priority " + jobs.priority[i] + " · " + jobs.n_gpus[i] + " GPU(s), share " + jobs.gpu_share[i] +
      "<br>submit " + fmt(jobs.submit_s[i]) + " · wait " + fmt(jobs.wait_s[i]) +
      "<br>start " + fmt(jobs.start_s[i]) + " · finish " + fmt(jobs.finish_s[i]) +
      "<br>requested " + fmt(jobs.requested_s[i]) + " · " + outcome(jobs, i) +
      (jobs.reason[i] ? " (" + jobs.reason[i] + ")" : "") +
      "<br>runs " + jobs.runs[i].length + " · preemptions " + jobs.preemptions[i] + " · failures " +
      jobs.failures[i] + "<br>GPUs " + jobs.gpus[i].join(", ");
  }

  function traces(run, field) {
    const jobs = run.jobs;
    const origin = jobs.start_s.reduce((low, s) => (s !== null && s < low ? s : low), Infinity);
    const groups = new Map();
    const marks = {preemption: {x: [], y: [], text: [], customdata: []},
      failure: {x: [], y: [], text: [], customdata: []}};
    for (let i = 0; i < jobs.job_id.length; i++) {
      if (jobs.state[i] === "rejected" || jobs.runs[i].length === 0) continue;
      const group = FIELDS[field](jobs, i);
      if (!groups.has(group)) groups.set(group, {base: [], x: [], y: [], text: [], customdata: []});
      const bars = groups.get(group);
      const text = hoverText(jobs, i);
      const runs = jobs.runs[i];
      runs.forEach(([start, end], k) => {
        const runText = runs.length > 1 ? text + "<br>this bar: run " + (k + 1) + " of " + runs.length + ", ended by " +
          jobs.run_ends[i][k] : text;
        for (const gpu of jobs.run_gpus[i][k]) {
          bars.base.push(hours(start, origin));
          bars.x.push(Math.max((end - start) / 3600, 1e-6));
          bars.y.push(gpu);
          bars.text.push(runText);
          bars.customdata.push(i);
        }
        const ending = jobs.run_ends[i][k];
        if (ending === "preemption" || ending === "failure") {
          marks[ending].x.push(hours(end, origin));
          marks[ending].y.push(jobs.run_gpus[i][k][0]);
          marks[ending].text.push("job " + jobs.job_id[i] + ": run " + (k + 1) + " of " + runs.length +
            " ended by a " + ending + " after " + ((end - start) / 3600).toFixed(2) + " h");
          marks[ending].customdata.push(i);
        }
      });
    }
    const names = [...groups.keys()].sort((a, b) => a.localeCompare(b, undefined, {numeric: true}));
    const outline = run.total_gpus <= 64 ? 0.5 : 0;  // thin rows of a large cluster would be all outline
    const out = names.map((name, n) => {
      const bars = groups.get(name);
      return {type: "bar", orientation: "h", name: name, base: bars.base, x: bars.x, y: bars.y, text: bars.text,
        customdata: bars.customdata, marker: {color: palette[n % palette.length], line: {width: outline,
          color: "white"}}, opacity: 0.9, hovertemplate: "%{text}<extra>" + name + "</extra>", textposition: "none"};
    });
    for (const [ending, symbol] of [["preemption", "x"], ["failure", "star"]]) {
      const m = marks[ending];
      if (m.x.length) {
        out.push({type: "scatter", mode: "markers", name: ending, x: m.x, y: m.y, text: m.text,
          customdata: m.customdata, hovertemplate: "%{text}<extra></extra>",
          marker: {symbol: symbol, size: 10, color: "black"}});
      }
    }
    return out;
  }

  function draw() {
    const run = data.runs[Number(runSelect.value)];
    const field = colourSelect.value;
    const layout = {
      title: {text: "Gantt chart — " + run.label + " (coloured by " + field + ")"},
      barmode: "overlay", bargap: 0.1, height: Math.min(1400, Math.max(480, 120 + 6 * run.total_gpus)),
      plot_bgcolor: "white",
      xaxis: {title: {text: "time since the first start [h]"}},
      yaxis: {title: {text: "GPU index"}, range: [run.total_gpus - 0.5, -0.5], gridcolor: "#eee"},
      legend: {orientation: "v", x: 1.02, y: 1, xanchor: "left"}, margin: {r: 220},
    };
    Plotly.react("gantt", traces(run, field), layout, {displaylogo: false});
    detail.textContent = "Click a job to see its whole record.";
    history.replaceState(null, "", "#run=" + runSelect.value + "&colour=" + field);
  }

  // A link can choose the run and the colour: report.html#run=INDEX&colour=FIELD (the page keeps its own there).
  data.runs.forEach((run, i) => runSelect.add(new Option(run.label, String(i))));
  const chosen = new URLSearchParams(location.hash.slice(1));
  if (Number(chosen.get("run")) in data.runs) runSelect.value = String(Number(chosen.get("run")));
  if (chosen.get("colour") in FIELDS) colourSelect.value = chosen.get("colour");
  runSelect.addEventListener("change", draw);
  colourSelect.addEventListener("change", draw);
  draw();
  document.getElementById("gantt").on("plotly_click", (event) => {
    const run = data.runs[Number(runSelect.value)];
    const i = event.points[0].customdata;
    detail.textContent = JSON.stringify(record(run.jobs, i), null, 1);
  });
})();
