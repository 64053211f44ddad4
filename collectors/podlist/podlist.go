// Package podlist reads the pods of one node from the Kubernetes API
// server (GET /api/v1/pods?fieldSelector=spec.nodeName=NODE, with the
// pod's service account token) or from the kubelet's own /pods, to name
// the pods and containers that collectors/cgroup finds by uid and id. It
// decodes the handful of fields it needs from the JSON itself: perfscope's
// binary carries no Kubernetes client library.
//
// The service account needs get and list on pods (a ClusterRole; see
// deploy/kubernetes/rbac.yaml); the kubelet's authenticated port
// (10250) needs nodes/proxy, which also allows exec into every pod of the
// node, and is therefore not what perfscope's manifests grant.
package podlist

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
)

// ServiceAccountDir is where Kubernetes mounts a pod's service account
// token, its CA bundle and namespace.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Defaults bounding what one listing costs.
const (
	// DefaultTimeout bounds one request.
	DefaultTimeout = 10 * time.Second
	// DefaultMinRefresh is the least time between two listings: a pod
	// unknown to the last one triggers a new listing, at most this often.
	DefaultMinRefresh = 30 * time.Second
	// maxBody bounds a listing: a node's pods (110 by default, 250 at
	// most) are a few MiB of JSON.
	maxBody = 64 << 20
)

// ErrNotInCluster is returned when perfscope does not run in a pod with a
// service account: no KUBERNETES_SERVICE_HOST, or no token.
var ErrNotInCluster = errors.New("not running in a Kubernetes pod with a service account")

// ErrForbidden is returned (wrapped) when the server refuses the listing
// (401 or 403): the service account lacks the RBAC to list pods.
var ErrForbidden = errors.New("not allowed to list pods")

// Config says where to list pods from.
type Config struct {
	// URL is the full listing URL: the API server's
	// /api/v1/pods?fieldSelector=spec.nodeName%3DNODE or a kubelet's /pods.
	URL string
	// TokenFile holds the bearer token, read before each request (the
	// kubelet rotates projected tokens); "" sends none (the kubelet's
	// read-only port).
	TokenFile string
	// CAs verify the server; nil uses the system's roots.
	CAs *x509.CertPool
	// Timeout and MinRefresh default to DefaultTimeout and
	// DefaultMinRefresh.
	Timeout, MinRefresh time.Duration
}

// InCluster configures the API server's listing of node's pods from
// what Kubernetes gives every pod: KUBERNETES_SERVICE_HOST and _PORT in
// the environment, and the service account's token and CA bundle below
// root (ServiceAccountDir). getenv is os.Getenv outside tests.
func InCluster(root string, getenv func(string) string, node string) (Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, fmt.Errorf("%w: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set", ErrNotInCluster)
	}
	if node == "" {
		return Config{}, errors.New("list this node's pods: the node's name is unknown (set NODE_NAME from spec.nodeName)")
	}
	dir := filepath.Join(root, ServiceAccountDir)
	token := filepath.Join(dir, "token")
	if _, err := os.Stat(token); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrNotInCluster, err)
	}
	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return Config{}, fmt.Errorf("the service account's CA bundle: %w", err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(pem) {
		return Config{}, fmt.Errorf("the service account's CA bundle %s holds no certificate", filepath.Join(dir, "ca.crt"))
	}
	u := url.URL{Scheme: "https", Host: net.JoinHostPort(host, port), Path: "/api/v1/pods",
		RawQuery: url.Values{"fieldSelector": {"spec.nodeName=" + node}}.Encode()}
	return Config{URL: u.String(), TokenFile: token, CAs: cas}, nil
}

// NodeName is the node perfscope runs on as Kubernetes names it: NODE_NAME
// (the manifests set it from spec.nodeName), else the host name, which is
// the kubelet's default node name.
func NodeName(getenv func(string) string) string {
	if n := getenv("NODE_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return strings.ToLower(h)
}

// Client lists pods and answers cgroup.PodNamer from the last listing. It
// is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	now  func() time.Time

	mu      sync.Mutex
	pods    map[string]cgroup.Pod
	fetched time.Time
	lastErr error
}

// New returns a client of cfg.
func New(cfg Config) *Client {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MinRefresh == 0 {
		cfg.MinRefresh = DefaultMinRefresh
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cfg.CAs, MinVersion: tls.VersionTLS12},
		Proxy: nil, ResponseHeaderTimeout: cfg.Timeout, MaxIdleConns: 1}
	return &Client{cfg: cfg, http: &http.Client{Transport: tr, Timeout: cfg.Timeout}, now: time.Now}
}

// PodByUID implements cgroup.PodNamer: it lists the pods when it has not
// yet, or when uid is unknown and the last listing is older than
// MinRefresh. A failed listing is retried no sooner than that either.
func (c *Client) PodByUID(uid string) (cgroup.Pod, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pods[uid]; ok {
		return p, true, nil
	}
	if !c.fetched.IsZero() && c.now().Sub(c.fetched) < c.cfg.MinRefresh {
		return cgroup.Pod{}, false, c.lastErr
	}
	c.fetched = c.now()
	pods, err := c.list()
	c.lastErr = err
	if err != nil {
		return cgroup.Pod{}, false, err
	}
	c.pods = map[string]cgroup.Pod{}
	for _, p := range pods {
		c.pods[p.UID] = p
	}
	p, ok := c.pods[uid]
	return p, ok, nil
}

// List lists the pods now.
func (c *Client) List() ([]cgroup.Pod, error) { return c.list() }

func (c *Client) list() ([]cgroup.Pod, error) {
	req, err := http.NewRequest(http.MethodGet, c.cfg.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.cfg.TokenFile != "" {
		tok, err := os.ReadFile(c.cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("list pods: the service account token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list pods from %s: %w", redact(c.cfg.URL), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("list pods from %s: %s: %w (the service account needs get and list on pods, see deploy/kubernetes/rbac.yaml)",
			redact(c.cfg.URL), resp.Status, ErrForbidden)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("list pods from %s: %s", redact(c.cfg.URL), resp.Status)
	}
	pods, err := decode(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("list pods from %s: %w", redact(c.cfg.URL), err)
	}
	return pods, nil
}

// redact is the URL without its query (no secrets are in it, but the
// node's name is noise in an error).
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the pod list"
	}
	u.RawQuery = ""
	return u.String()
}

// podList is the part of a v1 PodList perfscope reads.
type podList struct {
	Kind  string `json:"kind"`
	Items []struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			UID       string `json:"uid"`
		} `json:"metadata"`
		Status struct {
			QOSClass                   string            `json:"qosClass"`
			ContainerStatuses          []containerStatus `json:"containerStatuses"`
			InitContainerStatuses      []containerStatus `json:"initContainerStatuses"`
			EphemeralContainerStatuses []containerStatus `json:"ephemeralContainerStatuses"`
		} `json:"status"`
	} `json:"items"`
}

type containerStatus struct {
	Name string `json:"name"`
	// ContainerID is "containerd://ID", "cri-o://ID" or "docker://ID".
	ContainerID string `json:"containerID"`
}

// decode reads a PodList of at most maxBody bytes.
func decode(r io.Reader) ([]cgroup.Pod, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("the pod list is larger than %d MiB", maxBody>>20)
	}
	var l podList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("not a pod list: %w", err)
	}
	if l.Kind != "PodList" {
		return nil, fmt.Errorf("not a pod list: kind %q", l.Kind)
	}
	out := make([]cgroup.Pod, 0, len(l.Items))
	for _, it := range l.Items {
		p := cgroup.Pod{Namespace: it.Metadata.Namespace, Name: it.Metadata.Name, UID: it.Metadata.UID,
			QOSClass: it.Status.QOSClass, Containers: map[string]string{}}
		for _, list := range [][]containerStatus{it.Status.ContainerStatuses, it.Status.InitContainerStatuses, it.Status.EphemeralContainerStatuses} {
			for _, s := range list {
				if _, id, ok := strings.Cut(s.ContainerID, "://"); ok && id != "" {
					p.Containers[id] = s.Name
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}
