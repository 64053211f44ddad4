package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	toolkit "github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"
)

// WebConfig is a --web.config.file: the Prometheus exporters' web
// configuration (github.com/prometheus/exporter-toolkit's format, the
// same file node_exporter takes): tls_server_config, basic_auth_users
// (bcrypt hashes), http_server_config. The exporter toolkit serves with
// it and reads it again for each request and TLS handshake, so rotated
// certificates and changed users apply without a restart.
type WebConfig struct {
	Path string
	// TLS is set when the file configures a server certificate.
	TLS bool
	// BasicAuth is set when it lists users.
	BasicAuth bool
	// ClientCerts is set when it requires client certificates
	// (client_auth_type RequireAndVerifyClientCert or
	// RequireAnyClientCert).
	ClientCerts bool
}

// Authenticated is true when a scraper must prove who it is: a password
// or a client certificate.
func (c WebConfig) Authenticated() bool { return c.BasicAuth || c.ClientCerts }

// LoadWebConfig checks path as the exporter toolkit will use it (the YAML
// strictly, the certificates and keys loadable, the passwords bcrypt
// hashes) and says what it turns on. Its error is one sentence (exit 2).
func LoadWebConfig(path string) (WebConfig, error) {
	if err := toolkit.Validate(path); err != nil {
		return WebConfig{}, &badInput{fmt.Sprintf("--web.config.file %s: %s", path, oneLine(err.Error()))}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return WebConfig{}, &badInput{fmt.Sprintf("--web.config.file %s: %s", path, oneLine(err.Error()))}
	}
	var f struct {
		TLS struct {
			Cert       string `yaml:"cert"`
			CertFile   string `yaml:"cert_file"`
			ClientAuth string `yaml:"client_auth_type"`
		} `yaml:"tls_server_config"`
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return WebConfig{}, &badInput{fmt.Sprintf("--web.config.file %s: %s", path, oneLine(err.Error()))}
	}
	c := WebConfig{Path: path, TLS: f.TLS.Cert != "" || f.TLS.CertFile != "", BasicAuth: len(f.Users) > 0}
	switch f.TLS.ClientAuth {
	case "RequireAndVerifyClientCert", "RequireAnyClientCert", "RequireClientCert":
		c.ClientCerts = c.TLS
	}
	return c, nil
}

// oneLine folds the YAML decoder's multi-line errors into one line.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

// toolkitLog is the exporter toolkit's logger: its errors (a web
// configuration that stopped parsing, which it reports on every request)
// go to serve's HTTP error log, each distinct one once; its start-up
// notes are left out (serve prints its own start line).
type toolkitLog struct{ w io.Writer }

func (l toolkitLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

func (l toolkitLog) Handle(_ context.Context, r slog.Record) error {
	msg := "web config: " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.Key + "=" + a.Value.String()
		return true
	})
	_, err := io.WriteString(l.w, msg+"\n")
	return err
}

func (l toolkitLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l toolkitLog) WithGroup(string) slog.Handler      { return l }

// ExposedWarning says what a --listen beyond loopback exposes, or "" on
// loopback and when web makes scrapers authenticate over TLS: serve's
// metrics name the host's ports, processes and findings.
func ExposedWarning(listen string, web *WebConfig) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if host == "localhost" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	where := "on " + host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		where = "on every address of this host"
	}
	exposes := "anyone who can reach port " + port + " reads this host's ports, drops, lock wait, processes and findings"
	switch {
	case web == nil:
		return fmt.Sprintf("perfscope serve: warning: --listen %s serves /metrics %s without TLS or authentication: %s; "+
			"pass --web.config.file with tls_server_config and basic_auth_users (the exporter toolkit's format), "+
			"or --listen 127.0.0.1:%s behind an authenticating proxy\n", listen, where, exposes, port)
	case !web.Authenticated():
		return fmt.Sprintf("perfscope serve: warning: --listen %s serves /metrics %s without authentication: --web.config.file %s "+
			"lists no basic_auth_users and requires no client certificate, so %s; add basic_auth_users\n", listen, where, web.Path, exposes)
	case !web.TLS:
		return fmt.Sprintf("perfscope serve: warning: --listen %s serves /metrics %s without TLS: --web.config.file %s "+
			"has basic_auth_users but no tls_server_config, so passwords cross the network in clear text; add tls_server_config\n", listen, where, web.Path)
	}
	return ""
}
