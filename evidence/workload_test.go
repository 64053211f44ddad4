package evidence

import "testing"

func TestWorkloadLabel(t *testing.T) {
	s := func(v string) *string { return &v }
	id := "4b5e57f6eb2f42b9039b3d1e13929295f231749c510cbe341cd68036d9af97e2"
	for _, c := range []struct {
		w    Workload
		want string
	}{
		{Workload{Namespace: s("shop"), Pod: s("web-1"), Container: s("nginx"), PodUID: s("u"), ContainerID: s(id)}, "shop/web-1/nginx"},
		{Workload{Namespace: s("shop"), Pod: s("web-1"), ContainerID: s(id)}, "shop/web-1/4b5e57f6eb2f"},
		{Workload{PodUID: s("afd61604-8ab7-750a-3199-1673716530ff"), ContainerID: s(id)}, "pod-afd61604-8ab7-750a-3199-1673716530ff/4b5e57f6eb2f"},
		{Workload{ContainerID: s(id), Runtime: s("podman"), Container: s("cache")}, "podman:cache"},
		{Workload{ContainerID: s(id), Runtime: s("docker")}, "docker:4b5e57f6eb2f"},
		{Workload{Unit: s("nginx.service"), CgroupPath: s("/system.slice/nginx.service")}, "nginx.service"},
		{Workload{CgroupPath: s("/")}, "host"},
	} {
		if got := c.w.Label(); got != c.want {
			t.Errorf("%s, want %s", got, c.want)
		}
	}
}
