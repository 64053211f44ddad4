package flame

import (
	"html"
	"io"
	"strings"
)

// WriteHTML writes p as a self-contained HTML page: the interactive flame
// graph of WriteSVG with a toolbar for search (applied as you type), reset
// zoom and a flame/icicle toggle. Nothing is loaded from the network.
func WriteHTML(w io.Writer, p *Profile, o Options) error {
	o = o.withDefaults()
	return writeHTML(w, layout(p, o, nil))
}

func writeHTML(w io.Writer, g *graph) error {
	cfg, err := g.scriptConfig(true)
	if err != nil {
		return err
	}
	checked := ""
	if g.o.Reverse {
		checked = " checked"
	}
	head := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString(g.o.Title),
		"{{CSS}}", flameCSS,
		"{{CHECKED}}", checked,
	).Replace(htmlHead)
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	if err := writeSVG(w, g, true); err != nil {
		return err
	}
	// The script follows the SVG so that flameInit finds its elements.
	script := appendScript([]byte("<script>\n"), cfg)
	script = append(script, htmlTail...)
	_, err = w.Write(script)
	return err
}

const htmlHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{TITLE}}</title>
<style>
body { margin: 0; padding: 8px; background: #f8f8f8; font-family: Verdana, sans-serif; font-size: 13px; }
#toolbar { display: flex; gap: 12px; align-items: center; margin-bottom: 6px; }
#toolbar input[type=search] { width: 22em; font-family: monospace; }
#flamegraph { display: block; width: 100%; height: auto; }
{{CSS}}
</style>
</head>
<body>
<div id="toolbar">
<label>Search <input type="search" id="search-input" placeholder="regular expression, e.g. ^java/|_\[k\]$"></label>
<button id="reset-zoom" type="button">Reset zoom</button>
<label><input type="checkbox" id="icicle"{{CHECKED}}> Icicle (root at top)</label>
<span>Click a frame to zoom, Esc to reset.</span>
</div>
`

const htmlTail = `
flameInit(document.getElementById("flamegraph"));
document.getElementById("search-input").addEventListener("input", function (e) { flameSearch(e.target.value); });
document.getElementById("reset-zoom").addEventListener("click", function () { flameReset(); });
document.getElementById("icicle").addEventListener("change", function (e) { flameSetIcicle(e.target.checked); });
</script>
</body>
</html>
`
