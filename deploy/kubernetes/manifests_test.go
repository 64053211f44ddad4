// Package kubernetes validates perfscope's Kubernetes manifests against
// the real API types (k8s.io/api), in a module of its own so perfscope's
// binary does not depend on them.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// strict decodes YAML into v, refusing unknown or misspelt fields.
func strict(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// doctorPod is what the image's doctor says recipe needs, decoded
// strictly into the real PodSpec (so doctor's printer cannot drift from
// the API either).
func doctorPod(t *testing.T, recipe string) corev1.PodSpec {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "perfscope")
	build := exec.Command("go", "build", "-o", bin, "./cmd/perfscope")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build perfscope: %v\n%s", err, out)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "doctor", "--recipe", recipe, "--kubernetes", "-o", "json")
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("doctor --kubernetes: %v", err)
	}
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	var pod corev1.PodSpec
	if err := dec.Decode(&pod); err != nil {
		t.Fatalf("doctor's pod spec is not a PodSpec: %v", err)
	}
	// The YAML form decodes to the same spec.
	var y bytes.Buffer
	cmd = exec.Command(bin, "doctor", "--recipe", recipe, "--kubernetes")
	cmd.Stdout = &y
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	var fromYAML corev1.PodSpec
	if err := yaml.UnmarshalStrict(y.Bytes(), &fromYAML); err != nil {
		t.Fatalf("doctor's YAML: %v", err)
	}
	a, _ := json.Marshal(pod)
	b, _ := json.Marshal(fromYAML)
	if !bytes.Equal(a, b) {
		t.Errorf("doctor's YAML and JSON differ:\n%s\n%s", a, b)
	}
	return pod
}

// grantsNoMore checks that spec grants nothing doctor does not list for
// the recipe: capabilities, host namespaces, mounts (and their
// read-only-ness), and the hardening doctor asks for.
func grantsNoMore(t *testing.T, name string, spec corev1.PodSpec, want corev1.PodSpec) {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", name, len(spec.Containers))
	}
	c, w := spec.Containers[0], want.Containers[0]
	sc, wsc := c.SecurityContext, w.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatalf("%s: no securityContext.capabilities", name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged", name)
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: drop %v, want [ALL]", name, sc.Capabilities.Drop)
	}
	for _, c := range sc.Capabilities.Add {
		if !slices.Contains(wsc.Capabilities.Add, c) {
			t.Errorf("%s grants %s, which doctor does not list for the recipe (%v)", name, c, wsc.Capabilities.Add)
		}
	}
	for _, c := range wsc.Capabilities.Add {
		if !slices.Contains(sc.Capabilities.Add, c) {
			t.Errorf("%s lacks %s, which doctor lists for the recipe", name, c)
		}
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: root file system must be read-only and escalation off", name)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != wsc.SeccompProfile.Type {
		t.Errorf("%s: seccomp %+v, want %+v", name, sc.SeccompProfile, wsc.SeccompProfile)
	}
	if spec.HostPID != want.HostPID || spec.HostNetwork != want.HostNetwork || spec.HostIPC {
		t.Errorf("%s: hostPID %v hostNetwork %v hostIPC %v, doctor says %v %v false", name, spec.HostPID, spec.HostNetwork, spec.HostIPC, want.HostPID, want.HostNetwork)
	}
	wantMounts := map[string]corev1.VolumeMount{}
	for _, m := range w.VolumeMounts {
		wantMounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	wantVolumes := map[string]corev1.Volume{}
	for _, v := range want.Volumes {
		wantVolumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		wm, ok := wantMounts[m.MountPath]
		if !ok {
			t.Errorf("%s mounts %s, which doctor does not list", name, m.MountPath)
			continue
		}
		if wm.ReadOnly && !m.ReadOnly {
			t.Errorf("%s mounts %s writable; doctor says read-only", name, m.MountPath)
		}
		got, _ := json.Marshal(volumes[m.Name].VolumeSource)
		exp, _ := json.Marshal(wantVolumes[wm.Name].VolumeSource)
		if !bytes.Equal(got, exp) {
			t.Errorf("%s: volume of %s is %s, doctor says %s", name, m.MountPath, got, exp)
		}
	}
	if len(spec.Volumes) != len(c.VolumeMounts) {
		t.Errorf("%s: %d volumes for %d mounts", name, len(spec.Volumes), len(c.VolumeMounts))
	}
	if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: no resource limits", name)
	}
}

func TestManifests(t *testing.T) {
	want := doctorPod(t, "udp-rx")

	var ns corev1.Namespace
	strict(t, "namespace.yaml", &ns)

	var ds appsv1.DaemonSet
	strict(t, "daemonset.yaml", &ds)
	if ds.Namespace != ns.Name {
		t.Errorf("daemonset in %q, namespace is %q", ds.Namespace, ns.Name)
	}
	grantsNoMore(t, "daemonset", ds.Spec.Template.Spec, want)
	c := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "serve") || !slices.Contains(c.Args, "--recipe=udp-rx") {
		t.Errorf("daemonset args %v: want serve --recipe=udp-rx", c.Args)
	}
	if len(c.Ports) != 1 {
		t.Fatalf("ports %+v", c.Ports)
	}
	port := c.Ports[0]
	ann := ds.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != itoa(port.ContainerPort) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v for port %d", ann, port.ContainerPort)
	}
	if !slices.Contains(c.Args, "--listen=0.0.0.0:"+itoa(port.ContainerPort)) {
		t.Errorf("serve does not listen on the container port %d: %v", port.ContainerPort, c.Args)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != port.Name {
			t.Errorf("probe %+v: want GET %s on port %s", probe, path, port.Name)
		}
	}

	var job batchv1.Job
	strict(t, "job.yaml", &job)
	if job.Namespace != ns.Name || job.Spec.Template.Spec.NodeName == "" || job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("job: namespace %q node %q restart %q", job.Namespace, job.Spec.Template.Spec.NodeName, job.Spec.Template.Spec.RestartPolicy)
	}
	grantsNoMore(t, "job", job.Spec.Template.Spec, want)
	if args := job.Spec.Template.Spec.Containers[0].Args; len(args) < 3 || args[0] != "recipe" || args[1] != "run" || args[2] != "udp-rx" || !slices.Contains(args, "json") {
		t.Errorf("job args %v: want recipe run udp-rx, its JSON report to stdout", args)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// The RBAC that names pods grants reading pods and nothing more, to the
// service account in perfscope's namespace.
func TestRBAC(t *testing.T) {
	var ns corev1.Namespace
	strict(t, "namespace.yaml", &ns)
	b, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("rbac.yaml: %d documents, want a ServiceAccount, a ClusterRole and a ClusterRoleBinding", len(docs))
	}
	var sa corev1.ServiceAccount
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	for i, v := range []any{&sa, &role, &binding} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), v); err != nil {
			t.Fatalf("rbac.yaml document %d: %v", i+1, err)
		}
	}
	if sa.Kind != "ServiceAccount" || role.Kind != "ClusterRole" || binding.Kind != "ClusterRoleBinding" {
		t.Fatalf("kinds %q %q %q", sa.Kind, role.Kind, binding.Kind)
	}
	if sa.Namespace != ns.Name {
		t.Errorf("service account in %q, namespace is %q", sa.Namespace, ns.Name)
	}
	if len(role.Rules) != 1 {
		t.Fatalf("rules %+v", role.Rules)
	}
	r := role.Rules[0]
	if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"pods"}) || !slices.Equal(r.Verbs, []string{"get", "list"}) ||
		len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
		t.Errorf("the role grants %+v, want get and list on pods only", r)
	}
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 {
		t.Fatalf("binding %+v", binding)
	}
	if s := binding.Subjects[0]; s.Kind != "ServiceAccount" || s.Name != sa.Name || s.Namespace != sa.Namespace {
		t.Errorf("binding subject %+v, want the service account %s/%s", s, sa.Namespace, sa.Name)
	}
}
