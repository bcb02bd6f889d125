// freezeview's review page: pan and zoom every picture, click a box for its details,
// search, step through the freeze, and find where an attribute is read.
//
// freezeview's own code, written for this page rather than a pan/zoom library: the
// viewer needs little (a CSS transform on one element, wheel/drag/keys), and a page
// that must work from file:// with no network is simplest with nothing to ship beside it.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("fv-data").textContent);
  const viewport = document.getElementById("viewport");
  const canvas = document.getElementById("canvas");
  const select = document.getElementById("picture-select");
  const details = document.getElementById("details-body");
  const search = document.getElementById("search");
  const searchCount = document.getElementById("search-count");
  const link = document.getElementById("picture-link");
  const showUnchanged = document.getElementById("show-unchanged");
  const state = { picture: null, scale: 1, x: 0, y: 0, width: 0, height: 0,
                  matches: [], matchIndex: -1, selected: null };
  const pictures = new Map(data.pictures.map((p) => [p.id, p]));

  // -- the view transform --------------------------------------------------------------
  function apply() {
    canvas.style.transform = `translate(${state.x}px, ${state.y}px) scale(${state.scale})`;
  }
  function fit() {
    const w = viewport.clientWidth, h = viewport.clientHeight;
    if (!state.width || !state.height || !w || !h) return;
    state.scale = Math.min(w / state.width, h / state.height) * 0.96;
    state.x = (w - state.width * state.scale) / 2;
    state.y = (h - state.height * state.scale) / 2;
    apply();
  }
  function zoomAt(factor, px, py) {
    const scale = Math.min(40, Math.max(0.02, state.scale * factor));
    const k = scale / state.scale;
    state.x = px - (px - state.x) * k;
    state.y = py - (py - state.y) * k;
    state.scale = scale;
    apply();
  }
  function centreOn(element) {
    const v = viewport.getBoundingClientRect();
    let r = element.getBoundingClientRect();
    // Close enough to read: a box at least ~48 px tall, or the current zoom if larger.
    if (r.height && r.height < 48) {
      zoomAt(Math.min(48 / r.height, 40 / state.scale), r.left + r.width / 2 - v.left, r.top + r.height / 2 - v.top);
      r = element.getBoundingClientRect();
    }
    state.x += v.width / 2 - (r.left + r.width / 2 - v.left);
    state.y += v.height / 2 - (r.top + r.height / 2 - v.top);
    apply();
  }
  viewport.addEventListener("wheel", (event) => {
    event.preventDefault();
    const r = viewport.getBoundingClientRect();
    zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - r.left, event.clientY - r.top);
  }, { passive: false });
  let drag = null;
  viewport.addEventListener("pointerdown", (event) => {
    drag = { x: event.clientX, y: event.clientY, sx: state.x, sy: state.y, moved: false };
    viewport.setPointerCapture(event.pointerId);
  });
  viewport.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; viewport.classList.add("dragging"); }
    state.x = drag.sx + dx; state.y = drag.sy + dy;
    apply();
  });
  viewport.addEventListener("pointerup", (event) => {
    const moved = drag && drag.moved;
    drag = null;
    viewport.classList.remove("dragging");
    if (!moved) {
      const hit = document.elementFromPoint(event.clientX, event.clientY);
      const node = hit && hit.closest ? hit.closest("g.node") : null;
      if (node) showBox(node.id);
    }
  });
  // Links inside the SVG (tooltips) must not navigate.
  canvas.addEventListener("click", (event) => event.preventDefault());

  // -- pictures ------------------------------------------------------------------------
  function show(id, keepView) {
    const picture = pictures.get(id);
    if (!picture) return;
    const template = document.getElementById(`tpl-${id}`);
    const before = { scale: state.scale, x: state.x, y: state.y, width: state.width };
    canvas.replaceChildren(template.content.cloneNode(true));
    const svg = canvas.querySelector("svg");
    state.picture = id;
    select.value = id;
    link.href = picture.file; link.textContent = picture.file;
    const img = canvas.querySelector("img");
    state.width = state.height = 0;
    if (svg) {
      const vb = svg.viewBox.baseVal;
      state.width = vb.width; state.height = vb.height;
      svg.setAttribute("width", vb.width);
      svg.setAttribute("height", vb.height);
    } else if (img) {
      // A PNG export: its size is known once decoded (data: URIs decode at once).
      const sized = () => { state.width = img.naturalWidth; state.height = img.naturalHeight; fit(); };
      if (img.complete) sized(); else img.addEventListener("load", sized, { once: true });
    }
    const similar = before.width && Math.abs(before.width - state.width) / before.width < 0.25;
    if (keepView && similar) {
      state.scale = before.scale; state.x = before.x; state.y = before.y; apply();
    } else {
      fit();
    }
    document.querySelectorAll("#timeline li").forEach((li) => {
      li.classList.toggle("current", li.dataset.picture === id);
    });
    runSearch();
    // The details follow the picture: the box selected, if this picture has it, else
    // what the step did (never the box of the step shown before).
    const boxes = data.boxes[id] || {};
    if (state.selected && boxes[state.selected]) showBox(state.selected);
    else { state.selected = null; details.innerHTML = stepDetails(id); }
    if (state.highlight) highlightAttribute(state.highlight);
  }
  function stepDetails(id) {
    const li = stepItems.find((item) => item.dataset.picture === id);
    if (!li) return '<p class="meta">Click a box in the picture, or an attribute in the table, for its details.</p>';
    const part = (selector) => { const e = li.querySelector(selector); return e ? e.textContent : ""; };
    // The item's own text (its number and title), without the counts and notes below.
    const title = Array.from(li.childNodes).filter((n) => n.nodeName === "B" || n.nodeType === 3)
      .map((n) => n.textContent).join("").trim();
    return `<h2>step ${escapeHtml(title)}</h2><dl>` +
      `<dt>what it did</dt><dd>${escapeHtml(part(".counts"))}</dd>` +
      (part(".time") ? `<dt>time per node</dt><dd>${escapeHtml(part(".time"))}</dd>` : "") +
      (part(".notes") ? `<dt>notes</dt><dd>${escapeHtml(part(".notes"))}</dd>` : "") +
      '</dl><p class="meta">Click a box for its details.</p>';
  }
  select.addEventListener("change", () => show(select.value, false));

  // -- steps ---------------------------------------------------------------------------
  const stepItems = Array.from(document.querySelectorAll("#timeline li"));
  function visibleSteps() {
    return stepItems.filter((li) => li.dataset.picture && (showUnchanged.checked || !li.classList.contains("unchanged")));
  }
  function moveStep(delta) {
    const list = visibleSteps();
    if (!list.length) return;
    let index = list.findIndex((li) => li.dataset.picture === state.picture);
    index = index < 0 ? (delta > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, index + delta));
    show(list[index].dataset.picture, true);
  }
  stepItems.forEach((li) => li.addEventListener("click", () => {
    if (li.dataset.picture) show(li.dataset.picture, true);
  }));
  document.getElementById("prev").addEventListener("click", () => moveStep(-1));
  document.getElementById("next").addEventListener("click", () => moveStep(1));
  document.getElementById("zoom-in").addEventListener("click", () => zoomAt(1.25, viewport.clientWidth / 2, viewport.clientHeight / 2));
  document.getElementById("zoom-out").addEventListener("click", () => zoomAt(0.8, viewport.clientWidth / 2, viewport.clientHeight / 2));
  document.getElementById("fit").addEventListener("click", fit);

  // -- details -------------------------------------------------------------------------
  const escapeHtml = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  function irHtml(line) {
    // A light highlighting of one IR line: values, operators, types, the source comment.
    const [code, comment] = line.split(" # ");
    let out = escapeHtml(code)
      .replace(/(%[\w.]+)/g, '<span class="v">$1</span>')
      .replace(/\b([a-z_]+::[\w.]+)/g, '<span class="k">$1</span>')
      .replace(/: ([A-Z][\w\[\](), ]*?) =/, ': <span class="t">$1</span> =');
    if (comment) out += ` <span class="c"># ${escapeHtml(comment)}</span>`;
    return out;
  }
  function reasonsHtml(attribute) {
    return attribute.reasons.map((r) =>
      `<div class="reason"><code>${escapeHtml(r.code)}</code> ${escapeHtml(r.message)}` +
      (r.source ? `<br><span class="meta">${escapeHtml(r.source)}</span>` : "") +
      (r.source_text ? `<div class="src">${escapeHtml(r.source_text)}</div>` : "") + "</div>").join("");
  }
  const attributes = new Map(data.attributes.map((a) => [a.path, a]));
  function showBox(id) {
    const box = (data.boxes[state.picture] || {})[id];
    document.querySelectorAll("g.node.fv-selected").forEach((g) => g.classList.remove("fv-selected"));
    const element = document.getElementById(id);
    if (element) element.classList.add("fv-selected");
    state.selected = id;
    if (!box) { details.innerHTML = `<p class="meta">No details for ${escapeHtml(id)}.</p>`; return; }
    const rows = [];
    rows.push(`<h2>${escapeHtml(box.title)}</h2>`);
    rows.push(`<p><span class="badge ${box.status === "same" ? "dropped" : "inlined"}">${escapeHtml(box.status)}</span> ${escapeHtml(box.role)}${box.kept ? ' · <span class="badge kept">kept attribute</span>' : ""}</p><dl>`);
    if (box.ir) rows.push(`<dt>IR</dt><dd class="ir">${irHtml(box.ir)}</dd>`);
    if (box.scope) rows.push(`<dt>module</dt><dd>${escapeHtml(box.scope)}</dd>`);
    if (box.source) rows.push(`<dt>source</dt><dd>${escapeHtml(box.source)}${box.text ? `<div class="src">${escapeHtml(box.text)}</div>` : ""}</dd>`);
    if (box.change) rows.push(`<dt>what this step did</dt><dd>${escapeHtml(box.change)}</dd>`);
    if (box.time) rows.push(`<dt>time</dt><dd>${escapeHtml(box.time)}</dd>`);
    if (box.moved) rows.push(`<dt>where the numbers move</dt><dd>${escapeHtml(box.moved)}</dd>`);
    if (box.before) rows.push(`<dt>before</dt><dd class="ir">${irHtml(box.before)}</dd>`);
    if (box.holds) {
      // A module box: where its contents were drawn op by op, offer that picture.
      const finer = data.pictures.filter((p) => p.id !== state.picture && Object.values(data.boxes[p.id] || {})
        .some((b) => b.role !== "scope" && (b.scope === box.scope || (b.scope || "").startsWith(box.scope + "."))));
      const buttons = finer.map((p) => `<button class="finer" data-picture="${p.id}">${escapeHtml(p.title)}</button>`).join(" ");
      rows.push(`<dt>holds</dt><dd>${escapeHtml(box.holds)}${buttons ? `<br>drawn op by op in: ${buttons}` : ""}</dd>`);
    }
    if (box.rows && box.rows.length) rows.push(`<dt>label</dt><dd>${box.rows.map(escapeHtml).join("<br>")}</dd>`);
    const attribute = box.attribute ? attributes.get(box.attribute) : null;
    if (attribute) {
      rows.push(`<dt>attribute ${escapeHtml(attribute.path)}</dt><dd><span class="badge ${attribute.status}">${attribute.status}</span>${reasonsHtml(attribute)}</dd>`);
    }
    rows.push("</dl>");
    details.innerHTML = rows.join("");
    details.querySelectorAll("button.finer").forEach((button) => button.addEventListener("click", () => {
      show(button.dataset.picture, false);
      search.value = box.scope;
      runSearch();
      if (state.matches.length) nextMatch(1);
    }));
  }

  // -- search --------------------------------------------------------------------------
  function boxText(box) {
    return [box.title, box.ir, box.attribute, box.source, box.scope, (box.rows || []).join(" ")].join("\n").toLowerCase();
  }
  function runSearch() {
    document.querySelectorAll("g.node.fv-match, g.node.fv-current").forEach((g) => g.classList.remove("fv-match", "fv-current"));
    const query = search.value.trim().toLowerCase();
    state.matches = []; state.matchIndex = -1;
    if (!query) { searchCount.textContent = ""; return; }
    const boxes = data.boxes[state.picture] || {};
    for (const [id, box] of Object.entries(boxes)) {
      if (boxText(box).includes(query)) {
        const element = document.getElementById(id);
        if (element) { element.classList.add("fv-match"); state.matches.push(element); }
      }
    }
    searchCount.textContent = `${state.matches.length} match${state.matches.length === 1 ? "" : "es"}`;
  }
  function nextMatch(delta) {
    if (!state.matches.length) return;
    if (state.matchIndex >= 0) state.matches[state.matchIndex].classList.remove("fv-current");
    state.matchIndex = (state.matchIndex + delta + state.matches.length) % state.matches.length;
    const element = state.matches[state.matchIndex];
    element.classList.add("fv-current");
    centreOn(element);
    showBox(element.id);
    searchCount.textContent = `${state.matchIndex + 1} of ${state.matches.length}`;
  }
  search.addEventListener("input", runSearch);
  search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); nextMatch(event.shiftKey ? -1 : 1); }
    if (event.key === "Escape") { search.value = ""; runSearch(); search.blur(); }
  });

  // -- attributes ----------------------------------------------------------------------
  const attrRows = Array.from(document.querySelectorAll("#attr-table tr[data-path]"));
  document.getElementById("attr-filter").addEventListener("input", (event) => {
    const q = event.target.value.trim().toLowerCase();
    attrRows.forEach((tr) => { tr.hidden = q && !tr.textContent.toLowerCase().includes(q); });
  });
  function highlightAttribute(path) {
    state.highlight = path;
    const attribute = attributes.get(path);
    const writers = new Set((attribute ? attribute.reasons : []).map((r) => (r.node || "").split(" # ")[0]).filter(Boolean));
    const constant = `%self.${path}`;
    document.querySelectorAll("g.node.fv-match").forEach((g) => g.classList.remove("fv-match"));
    state.matches = []; state.matchIndex = -1;
    for (const [id, box] of Object.entries(data.boxes[state.picture] || {})) {
      const ir = (box.ir || "").split(" # ")[0];
      const reads = box.attribute === path || ir.includes(constant + " ") || ir.includes(constant + ".") || (box.reads || []).includes(path);
      if (reads || writers.has(ir)) {
        const element = document.getElementById(id);
        if (element) { element.classList.add("fv-match"); state.matches.push(element); }
      }
    }
    searchCount.textContent = `${path}: ${state.matches.length} box${state.matches.length === 1 ? "" : "es"}`;
    attrRows.forEach((tr) => tr.classList.toggle("current", tr.dataset.path === path));
    const a = attributes.get(path);
    if (a) details.innerHTML = `<h2>${escapeHtml(a.path)}</h2><p><span class="badge ${a.status}">${a.status}</span> ${escapeHtml(a.kind)} ${escapeHtml(a.type)}</p>${reasonsHtml(a)}`;
  }
  attrRows.forEach((tr) => tr.addEventListener("click", () => {
    highlightAttribute(tr.dataset.path);
    if (state.matches.length) nextMatch(1);
  }));
  // The header's written-constant warning: each attribute it names, as its table row does.
  document.querySelectorAll("#written-warning a[data-path]").forEach((link) => link.addEventListener("click", (event) => {
    event.preventDefault();
    highlightAttribute(link.dataset.path);
    if (state.matches.length) nextMatch(1);
  }));

  // The header's "where the numbers move": each node named, shown in its step's picture.
  document.querySelectorAll("a[data-picture][data-box]").forEach((link) => link.addEventListener("click", (event) => {
    event.preventDefault();
    show(link.dataset.picture, false);
    const element = document.getElementById(link.dataset.box);
    if (element) centreOn(element);
    showBox(link.dataset.box);
  }));

  // -- tabs and keys -------------------------------------------------------------------
  document.querySelectorAll(".tabs button").forEach((button) => button.addEventListener("click", () => {
    document.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("active", b === button));
    document.querySelectorAll(".tab").forEach((t) => { t.hidden = t.id !== button.dataset.tab; });
    // The attributes' table takes the room it needs; the picture keeps what is left.
    document.getElementById("layout").classList.toggle("attrs", button.dataset.tab === "attrs-tab");
    if (state.scale) fit();
  }));
  document.addEventListener("keydown", (event) => {
    if (event.target.matches && event.target.matches("input, select, textarea")) return;
    const cx = viewport.clientWidth / 2, cy = viewport.clientHeight / 2;
    if (event.key === "n") moveStep(1);
    else if (event.key === "p") moveStep(-1);
    else if (event.key === "+" || event.key === "=") zoomAt(1.25, cx, cy);
    else if (event.key === "-") zoomAt(0.8, cx, cy);
    else if (event.key === "0") fit();
    else if (event.key === "/") { event.preventDefault(); search.focus(); }
    else return;
  });
  window.addEventListener("resize", () => { if (state.scale) fit(); });

  // The test hooks: what a browser test reads back.
  window.freezeview = { state, show, fit, moveStep, showBox, highlightAttribute };
  show(data.pictures.length ? data.start : null, false);
  document.body.dataset.ready = "true";
})();
