// perfscope flame graph: hover details, click to zoom, regex search with the
// share of the total it matches, reset, flame/icicle toggle. Written for
// both the standalone SVG and the HTML page, which call the same functions.
"use strict";
var flameFrames = [], flameRoot = null, flameZoomed = null, flameSearchRe = null;
var flameDetails, flameMatched, flameUnzoom, flameSearchBtn, flameIcicle;

function flameInit(root) {
	flameRoot = root;
	var cfg = flameConfig;
	flameIcicle = cfg.icicle;
	var get = function (id) { return root.querySelector("#" + id); };
	flameDetails = get("details");
	flameMatched = get("matched");
	flameUnzoom = get("unzoom");
	flameSearchBtn = get("search");
	var gs = get("frames").children;
	for (var i = 0; i < gs.length; i++) {
		var g = gs[i], rect = g.querySelector("rect"), text = g.querySelector("text");
		var title = g.querySelector("title").textContent;
		var cut = title.lastIndexOf(" (");
		var y = +rect.getAttribute("y");
		var depth = cfg.icicle ? Math.round((y - cfg.ypad1) / cfg.fh)
			: Math.round((cfg.height - cfg.ypad2 - y) / cfg.fh) - 1;
		var f = {
			g: g, rect: rect, text: text, title: title, name: cut > 0 ? title.substring(0, cut) : title,
			x: +rect.getAttribute("x"), w: +rect.getAttribute("width"), depth: depth,
			fill: rect.getAttribute("fill")
		};
		g.flame = f;
		flameFrames.push(f);
	}
	root.addEventListener("mouseover", function (e) {
		var f = flameFrameOf(e.target);
		if (f) flameDetails.textContent = (cfg.diff ? "" : "Function: ") + f.title;
	});
	root.addEventListener("mouseout", function (e) {
		if (flameFrameOf(e.target)) flameDetails.textContent = " ";
	});
	root.addEventListener("click", function (e) {
		var f = flameFrameOf(e.target);
		if (f) { flameZoom(f); return; }
		var id = e.target.id;
		if (id === "unzoom") flameReset();
		else if (id === "search") {
			if (flameSearchRe) { flameSearch(""); return; }
			var term = prompt("Search frames (regular expression)", "");
			if (term) flameSearch(term);
		} else if (id === "invert") flameSetIcicle(!flameIcicle);
	});
	window.addEventListener("keydown", function (e) {
		if ((e.ctrlKey || e.metaKey) && e.key === "f" && !cfg.embedded) {
			e.preventDefault();
			var term = prompt("Search frames (regular expression)", "");
			if (term) flameSearch(term);
		} else if (e.key === "Escape") {
			flameReset();
			flameSearch("");
		}
	});
	if (flameUnzoom) flameUnzoom.classList.add("hide");
}

function flameFrameOf(el) {
	while (el && el !== flameRoot) {
		if (el.flame) return el.flame;
		el = el.parentNode;
	}
	return null;
}

// flameFit shortens a name to what fits in w pixels.
function flameFit(name, w) {
	var chars = Math.floor((w - 3) / (flameConfig.fs * 0.59));
	if (chars < 3) return "";
	if (name.length <= chars) return name;
	return name.substring(0, chars - 2) + "..";
}

function flamePlace(f, x, w) {
	f.rect.setAttribute("x", x.toFixed(2));
	f.rect.setAttribute("width", w.toFixed(2));
	f.text.setAttribute("x", (x + 3).toFixed(2));
	f.text.textContent = flameFit(f.name, w);
	f.g.style.display = "";
}

// flameRowY is the top of a row, for the current orientation.
function flameRowY(depth) {
	var c = flameConfig;
	return flameIcicle ? c.ypad1 + depth * c.fh : c.height - c.ypad2 - (depth + 1) * c.fh;
}

function flameZoom(z) {
	var c = flameConfig, eps = 1e-6, full = c.width - 2 * c.xpad;
	var ratio = full / z.w;
	for (var i = 0; i < flameFrames.length; i++) {
		var f = flameFrames[i];
		if (f.depth < z.depth && f.x <= z.x + eps && f.x + f.w >= z.x + z.w - eps) {
			flamePlace(f, c.xpad, full); // ancestors span the width
			f.g.classList.add("parent");
		} else if (f.depth >= z.depth && f.x >= z.x - eps && f.x + f.w <= z.x + z.w + eps) {
			flamePlace(f, c.xpad + (f.x - z.x) * ratio, f.w * ratio);
			f.g.classList.remove("parent");
		} else {
			f.g.style.display = "none";
		}
	}
	flameZoomed = z;
	if (flameUnzoom) flameUnzoom.classList.remove("hide");
}

function flameReset() {
	for (var i = 0; i < flameFrames.length; i++) {
		var f = flameFrames[i];
		flamePlace(f, f.x, f.w);
		f.g.classList.remove("parent");
	}
	flameZoomed = null;
	if (flameUnzoom) flameUnzoom.classList.add("hide");
}

// flameSearch highlights frames whose name matches term (a regular
// expression) and shows the share of the total they cover, counting a
// frame only once when its caller matches too. An empty term clears.
function flameSearch(term) {
	var c = flameConfig, spans = [];
	var re = null;
	if (term) {
		try { re = new RegExp(term); } catch (err) { flameMatched.textContent = "Bad regex: " + err.message; return; }
	}
	flameSearchRe = re;
	for (var i = 0; i < flameFrames.length; i++) {
		var f = flameFrames[i];
		if (re && re.test(f.name)) {
			f.rect.setAttribute("fill", "rgb(230,0,230)");
			spans.push([f.x, f.x + f.w]);
		} else {
			f.rect.setAttribute("fill", f.fill);
		}
	}
	if (flameSearchBtn) flameSearchBtn.classList.toggle("active", !!re);
	if (!re) { flameMatched.textContent = " "; return 0; }
	spans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
	var covered = 0, end = -Infinity;
	for (var j = 0; j < spans.length; j++) {
		var s = spans[j];
		if (s[0] >= end) { covered += s[1] - s[0]; end = s[1]; }
		else if (s[1] > end) { covered += s[1] - end; end = s[1]; }
	}
	var pct = 100 * covered / (c.width - 2 * c.xpad);
	flameMatched.textContent = "Matched: " + pct.toFixed(1) + "%";
	return pct;
}

function flameSetIcicle(on) {
	var c = flameConfig;
	flameIcicle = on;
	for (var i = 0; i < flameFrames.length; i++) {
		var f = flameFrames[i], y = flameRowY(f.depth);
		f.rect.setAttribute("y", y.toFixed(2));
		f.text.setAttribute("y", (y + c.fh / 2 + c.fs / 2 - 2).toFixed(2));
	}
}
