package podlist

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/internal/testutil"
)

const apiPod = "402a1f4d-7fb8-4ad6-104a-868f0fa448a2"

// fakeAPI is an API server that lists node-1's pods to the bearer of
// token, and counts the listings.
type fakeAPI struct {
	*httptest.Server
	ca       *testutil.CA
	token    atomic.Value
	listings atomic.Int32
	status   atomic.Int32
	body     []byte
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	body, err := os.ReadFile("testdata/pods-node-1.json")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAPI{body: body, ca: testutil.NewCA(t, "kubernetes")}
	f.token.Store("tok-1")
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.listings.Add(1)
		if s := f.status.Load(); s != 0 {
			http.Error(w, `{"kind":"Status","status":"Failure","reason":"Forbidden"}`, int(s))
			return
		}
		if r.URL.Path != "/api/v1/pods" || r.URL.Query().Get("fieldSelector") != "spec.nodeName=node-1" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+f.token.Load().(string) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(f.body)
	}))
	f.TLS = &tls.Config{Certificates: []tls.Certificate{f.ca.TLSCertificate(t, "kube-apiserver")}}
	f.StartTLS()
	t.Cleanup(f.Close)
	return f
}

// inCluster lays out a pod's service account below a temporary root and
// configures the client from it as perfscope would in the pod.
func (f *fakeAPI) inCluster(t *testing.T) (Config, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, ServiceAccountDir)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "token"), []byte(f.token.Load().(string)+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "ca.crt"), f.ca.PEM, 0o644)
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(f.URL, "https://"))
	env := map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
	cfg, err := InCluster(root, func(k string) string { return env[k] }, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, "token")
}

func TestListThisNodesPods(t *testing.T) {
	api := newFakeAPI(t)
	cfg, _ := api.inCluster(t)
	if !strings.HasSuffix(cfg.URL, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1") {
		t.Errorf("URL %s", cfg.URL)
	}
	pods, err := New(cfg).List()
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Fatalf("%d pods", len(pods))
	}
	p := pods[0]
	if p.Namespace != "shop" || p.Name != "api-6b9f-qwert" || p.UID != apiPod || p.QOSClass != "Burstable" {
		t.Errorf("%+v", p)
	}
	want := map[string]string{
		"14c2529eb4498c5d1ffd6915d05bf58a91bdda796af59f41d480d11c099d0479": "api",
		"5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b": "envoy",
		"9e1f3c0d5b7a2e4c6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e": "migrate",
	}
	if len(p.Containers) != len(want) {
		t.Errorf("containers %v", p.Containers)
	}
	for id, name := range want {
		if p.Containers[id] != name {
			t.Errorf("container %s: %q, want %q", id[:12], p.Containers[id], name)
		}
	}
	// A container still being created has no id yet.
	if len(pods[1].Containers) != 0 {
		t.Errorf("pending pod's containers %v", pods[1].Containers)
	}
}

// The index names a container the runtime's state on the node does not
// (here: none is readable) from the API.
func TestIndexNamesFromTheAPI(t *testing.T) {
	api := newFakeAPI(t)
	cfg, _ := api.inCluster(t)
	x := cgroup.NewIndex(cgroup.FS{Root: "../cgroup/testdata/v2-systemd"}, New(cfg))
	w, err := x.Attribute(112)
	if err != nil {
		t.Fatal(err)
	}
	if w.Namespace == nil || *w.Namespace != "shop" || *w.Pod != "api-6b9f-qwert" || *w.Container != "api" || *w.NamesFrom != "kubernetes api" {
		t.Errorf("%+v", w)
	}
	sel, err := x.Select(must(cgroup.PodFilter("shop/api-6b9f-qwert")))
	if err != nil || len(sel.Processes) != 1 || sel.Processes[0].PID != 112 {
		t.Errorf("--pod shop/api-6b9f-qwert: %+v %v", sel, err)
	}
}

func must(f cgroup.Filter, err error) cgroup.Filter {
	if err != nil {
		panic(err)
	}
	return f
}

func TestRefresh(t *testing.T) {
	api := newFakeAPI(t)
	cfg, tokenFile := api.inCluster(t)
	c := New(cfg)
	now := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { return now }
	if _, ok, err := c.PodByUID(apiPod); !ok || err != nil {
		t.Fatalf("%v %v", ok, err)
	}
	// Known pods are answered from the listing; an unknown one lists
	// again only after MinRefresh.
	c.PodByUID(apiPod)
	if _, ok, _ := c.PodByUID("0f0f0f0f-0000-0000-0000-000000000000"); ok || api.listings.Load() != 1 {
		t.Fatalf("ok %v, %d listings", ok, api.listings.Load())
	}
	// The kubelet rotated the token: the next listing reads the new one.
	api.token.Store("tok-2")
	os.WriteFile(tokenFile, []byte("tok-2"), 0o600)
	now = now.Add(DefaultMinRefresh)
	if _, _, err := c.PodByUID("0f0f0f0f-0000-0000-0000-000000000000"); err != nil || api.listings.Load() != 2 {
		t.Fatalf("after MinRefresh: %v, %d listings", err, api.listings.Load())
	}
}

func TestForbidden(t *testing.T) {
	api := newFakeAPI(t)
	cfg, _ := api.inCluster(t)
	api.status.Store(http.StatusForbidden)
	c := New(cfg)
	_, _, err := c.PodByUID(apiPod)
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "403 Forbidden") || !strings.Contains(err.Error(), "get and list on pods") {
		t.Fatalf("%v", err)
	}
	// Not asked again at once: a node's every process must not each
	// cost a refused request.
	if _, _, err2 := c.PodByUID(apiPod); err2 == nil || api.listings.Load() != 1 {
		t.Fatalf("%v, %d listings", err2, api.listings.Load())
	}
}

func TestNotInCluster(t *testing.T) {
	_, err := InCluster(t.TempDir(), func(string) string { return "" }, "node-1")
	if !errors.Is(err, ErrNotInCluster) {
		t.Fatalf("%v", err)
	}
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	_, err = InCluster(t.TempDir(), func(k string) string { return env[k] }, "node-1")
	if !errors.Is(err, ErrNotInCluster) {
		t.Fatalf("no token: %v", err)
	}
}

// A server whose certificate the service account's CA did not sign is
// refused.
func TestWrongCA(t *testing.T) {
	api := newFakeAPI(t)
	other := newFakeAPI(t)
	cfg, _ := other.inCluster(t)
	cfg.URL = api.URL + "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
	if _, err := New(cfg).List(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("%v", err)
	}
	if api.listings.Load() != 0 {
		t.Error("the request reached the untrusted server")
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, body := range []string{`{"kind":"Status"}`, `not json`, `[]`} {
		if _, err := decode(strings.NewReader(body)); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
}

func TestNodeName(t *testing.T) {
	if n := NodeName(func(k string) string { return map[string]string{"NODE_NAME": "node-7"}[k] }); n != "node-7" {
		t.Errorf("%q", n)
	}
	h, _ := os.Hostname()
	if n := NodeName(func(string) string { return "" }); n != strings.ToLower(h) {
		t.Errorf("%q, host name %q", n, h)
	}
}
