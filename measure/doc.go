// Package measure is the measuring runtime between perfscope's recipes
// (and the commands that follow them) and its probes and collectors:
// what one measurement is, run the same way by every command.
//
// A run opens the probes of one or more parts, takes a first reading of
// every source, waits out one window (Ctrl-C ends it early; with an
// interval, parts that keep a timeline read at each tick), takes a last
// reading, and measures perfscope's own cost over the window: the
// Window, Session and Part types in window.go. Each capability has a
// runner that takes typed options and injectable Sources (the /proc and
// /sys root, an ethtool source, netlink, a probe opener) and returns
// evidence: RunNet, RunSoftirq, RunLocks, RunProfile, RunJVM and RunGC.
// Because every source is injected, evidence assembly is tested without
// root from recorded probe snapshots and collector fixtures.
//
// Runners return evidence and, through each result's Report method, the
// report envelope with findings; rendering is report.Render's job. Parts
// joins a run's parts (built by a recipe's plan) and assembles their
// Sections, with the timeline that joins their intervals by tick. The
// overhead budget (Budget, the governor that keeps it) is package
// measure/budget; the session drives its governor.
package measure
