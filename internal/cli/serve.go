package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/internal/serve"
	"github.com/perfscope/perfscope/measure"
)

type serveOptions struct {
	serve.Flags

	opts serve.Options
	src  measure.Sources
	// run is injectable so flag parsing is tested without probes.
	run func(ctx context.Context, o *serveOptions, g *Globals) error
}

func newServeCmd(g *Globals) *cobra.Command {
	return serveCmd(g, &serveOptions{src: measure.Live(), run: runServe})
}

func serveCmd(g *Globals, o *serveOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve --recipe NAME|FILE [--listen ADDR] [--interval 30s] [--set KEY=VALUE]...",
		Short: "Run a recipe continuously and expose its measurements and findings as Prometheus metrics",
		Long: `serve attaches a recipe's probes once and measures window after window
(--interval each), exposing in OpenMetrics (or the Prometheus text format, as
the scraper asks) at http://ADDR/metrics: softirqs per CPU and vector, packets
per NIC queue, lock wait by lock class and by socket port, UDP drops by port and
reason, a JVM's GC and safepoint counts (recipes reading hsperfdata), the
findings of the recipe's rules with their key numbers
(perfscope_finding{id,severity}, perfscope_finding_impact,
perfscope_finding_parameter), and perfscope's own cost (BPF run time per
program, events lost, its CPU and memory). /healthz answers while the process
serves, /readyz once a window completed within the last three intervals.

It listens on loopback unless --listen says otherwise. --web.config.file takes
the web configuration file of Prometheus' exporters (the exporter toolkit's
format, as node_exporter's): TLS (tls_server_config) and basic auth
(basic_auth_users, bcrypt hashes) on every endpoint, re-read on each request
so rotated certificates apply. On any address but loopback, serve warns when
no scraper has to authenticate (no basic_auth_users, no required client
certificates), or when passwords would cross the network without TLS. Every endpoint answers
GET and HEAD only (405 otherwise). It holds at most ` + strconv.Itoa(serve.DefaultMaxConnections) + ` connections (fewer
when the open-file limit is low: descriptors stay reserved for the probes'
windows); past that, the connection waiting longest for a request is closed,
never a scrape being answered. A failed window is retried after 1s, twice as
late after each further failure up to 1m, and each distinct error is printed
once (then counted). SIGTERM or Ctrl-C ends the window in progress, drains the
HTTP server and detaches every probe.

--recipe takes a built-in or a recipe file, as perfscope recipe run does, with
the same --set parameters; --interval replaces the recipe's duration (setting
the duration with --set is refused). A recipe that measures once is refused:
async-profiler (its window is inside the JVM), gclog (it reads files
afterwards) and output files. Built-ins served: ` + servedPlaceholder + `.`,
		Example: `  perfscope serve --recipe udp-rx --set iface=eth0 --set port=9000
  perfscope serve --recipe softirq-balance --listen 0.0.0.0:9742 --interval 15s
  perfscope serve --recipe udp-rx --set iface=eth0 --listen 0.0.0.0:9742 --web.config.file /etc/perfscope/web.yml
  curl -s localhost:9742/metrics | grep perfscope_finding`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.opts, err = o.Options(); err != nil {
				return err
			}
			if w := serve.ExposedWarning(o.Listen, o.opts.Web); w != "" {
				io.WriteString(g.Err, w)
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Recipe, "recipe", "", "the recipe to run, a built-in or a file: "+servedPlaceholder)
	f.StringVar(&o.Listen, "listen", serve.DefaultListen, "address to serve /metrics on (host:port)")
	f.StringVar(&o.WebConfigFile, "web.config.file", "", "the exporter toolkit's web configuration file: TLS and basic auth (as node_exporter's)")
	f.DurationVar(&o.Interval, "interval", 30*time.Second, "length of each measurement window (1s to 1h)")
	f.StringArrayVar(&o.Set, "set", nil, "a recipe parameter, KEY=VALUE (repeatable), e.g. iface=eth0")
	f.IntVar(&o.TopWorkloads, "top-workloads", serve.DefaultTopN, "per metric and window, how many workloads (namespace, pod, container) keep their own series, the largest first; the rest add up in one series labelled \"other\" (1-"+strconv.Itoa(serve.MaxTopWorkloads)+")")
	_ = cmd.RegisterFlagCompletionFunc("recipe", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return serve.Names(), cobra.ShellCompDirectiveNoFileComp
	})
	// The served built-ins are named only when help or usage is shown:
	// finding them parses every built-in, which every other command
	// (a short perfscope udp among them) would otherwise pay at start.
	help, usage := cmd.HelpFunc(), cmd.UsageFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		nameServed(c)
		help(c, args)
	})
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		nameServed(c)
		return usage(c)
	})
	return cmd
}

// servedPlaceholder stands for the served built-ins in serve's help text
// until nameServed names them.
const servedPlaceholder = "<served built-ins>"

// nameServed puts the served built-ins into serve's help text and its
// --recipe flag's usage.
func nameServed(c *cobra.Command) {
	names := strings.Join(serve.Names(), ", ")
	c.Long = strings.ReplaceAll(c.Long, servedPlaceholder, names)
	if f := c.Flags().Lookup("recipe"); f != nil {
		f.Usage = strings.ReplaceAll(f.Usage, servedPlaceholder, names)
	}
}

func runServe(ctx context.Context, o *serveOptions, g *Globals) error {
	var srv *serve.Server
	opts := o.opts
	opts.Log, opts.Started, opts.Version = g.Err, g.Started, Version()
	opts.OnListen = func(addr string) { fmt.Fprintln(g.Err, srv.Listening(addr)) }
	srv, err := serve.Open(o.src, opts)
	if err != nil {
		return err // recipes' errors carry their exit code (CodeOf)
	}
	// An address that cannot be listened on is bad input (serve.Run).
	return srv.Run(ctx)
}
