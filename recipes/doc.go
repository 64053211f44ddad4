// Package recipes is the floor between perfscope's commands and its probes
// and collectors: what one measurement is, run the same way by every
// command (and by declarative recipes built on it).
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
// report envelope with findings; rendering is report.Render's job.
package recipes
