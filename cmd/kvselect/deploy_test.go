package main

// The deploy files (deploy/Dockerfile, .dockerignore and
// deploy/kubernetes/) run this command, so they are checked here,
// where the command's own flag parsing can judge the manifest's
// arguments. Nothing is downloaded: no Kubernetes schema, no image.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	httpd "github.com/kvselect/kvselect/http"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/schemacheck"
	"github.com/kvselect/kvselect/server/nodeflags"
	"go.yaml.in/yaml/v3"
)

var (
	repoRoot     = filepath.Join("..", "..")
	dockerfile   = filepath.Join(repoRoot, "deploy", "Dockerfile")
	dockerignore = filepath.Join(repoRoot, ".dockerignore")
	manifestDir  = filepath.Join(repoRoot, "deploy", "kubernetes")
)

// The few Kubernetes fields the tests read; the rest is ignored.
type (
	k8sObject struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		file string
		node *yaml.Node
	}
	service struct {
		Spec struct {
			ClusterIP                string            `yaml:"clusterIP"`
			PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
			Selector                 map[string]string `yaml:"selector"`
			Ports                    []servicePort     `yaml:"ports"`
		} `yaml:"spec"`
	}
	servicePort struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort any    `yaml:"targetPort"`
	}
	secret struct {
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
	}
	statefulSet struct {
		Spec struct {
			ServiceName string `yaml:"serviceName"`
			Replicas    int    `yaml:"replicas"`
			Template    struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec podSpec `yaml:"spec"`
			} `yaml:"template"`
			VolumeClaimTemplates []claimTemplate `yaml:"volumeClaimTemplates"`
		} `yaml:"spec"`
	}
	podSpec struct {
		SecurityContext struct {
			RunAsNonRoot        *bool  `yaml:"runAsNonRoot"`
			RunAsUser           *int64 `yaml:"runAsUser"`
			RunAsGroup          *int64 `yaml:"runAsGroup"`
			FSGroup             *int64 `yaml:"fsGroup"`
			FSGroupChangePolicy string `yaml:"fsGroupChangePolicy"`
			SeccompProfile      struct {
				Type string `yaml:"type"`
			} `yaml:"seccompProfile"`
		} `yaml:"securityContext"`
		Affinity struct {
			PodAntiAffinity *podAntiAffinity `yaml:"podAntiAffinity"`
		} `yaml:"affinity"`
		Containers []container `yaml:"containers"`
		Volumes    []struct {
			Name   string `yaml:"name"`
			Secret *struct {
				SecretName  string `yaml:"secretName"`
				DefaultMode *int   `yaml:"defaultMode"`
				Items       []struct {
					Key  string `yaml:"key"`
					Path string `yaml:"path"`
				} `yaml:"items"`
			} `yaml:"secret"`
		} `yaml:"volumes"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
				ResourceFieldRef *struct {
					ContainerName string `yaml:"containerName"`
					Resource      string `yaml:"resource"`
				} `yaml:"resourceFieldRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []volumeMount `yaml:"volumeMounts"`
	}
	podAntiAffinity struct {
		Required  []podAffinityTerm `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
		Preferred []struct {
			Weight          int             `yaml:"weight"`
			PodAffinityTerm podAffinityTerm `yaml:"podAffinityTerm"`
		} `yaml:"preferredDuringSchedulingIgnoredDuringExecution"`
	}
	podAffinityTerm struct {
		TopologyKey   string        `yaml:"topologyKey"`
		LabelSelector labelSelector `yaml:"labelSelector"`
	}
	serviceMonitor struct {
		Spec struct {
			Selector  labelSelector `yaml:"selector"`
			Endpoints []struct {
				Port          string `yaml:"port"`
				Path          string `yaml:"path"`
				Scheme        string `yaml:"scheme"`
				Authorization *struct {
					Type        string `yaml:"type"`
					Credentials struct {
						Name string `yaml:"name"`
						Key  string `yaml:"key"`
					} `yaml:"credentials"`
				} `yaml:"authorization"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
	objectMeta struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
	}
	volumeMount struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	}
	networkPolicy struct {
		Spec struct {
			PodSelector labelSelector `yaml:"podSelector"`
			PolicyTypes []string      `yaml:"policyTypes"`
			Ingress     []struct {
				From []struct {
					PodSelector       *labelSelector `yaml:"podSelector"`
					NamespaceSelector *labelSelector `yaml:"namespaceSelector"`
					IPBlock           any            `yaml:"ipBlock"`
				} `yaml:"from"`
				Ports []struct {
					Port any `yaml:"port"`
				} `yaml:"ports"`
			} `yaml:"ingress"`
		} `yaml:"spec"`
	}
	labelSelector struct {
		MatchLabels      map[string]string `yaml:"matchLabels"`
		MatchExpressions []any             `yaml:"matchExpressions"`
	}
	claimTemplate struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
		TimeoutSeconds int `yaml:"timeoutSeconds"`
	}
)

// manifestFiles lists the manifests under deploy/kubernetes, its
// kustomizations (kustomization.yaml) left out.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(manifestDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") && d.Name() != kustomizationFile {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	return files
}

// kustomizationFile is the name kubectl apply -k looks for.
const kustomizationFile = "kustomization.yaml"

// loadManifests reads every document of the manifests under
// deploy/kubernetes.
func loadManifests(t *testing.T) []k8sObject {
	t.Helper()
	files := manifestFiles(t)
	var out []k8sObject
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var node yaml.Node
			if err := dec.Decode(&node); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var o k8sObject
			if err := node.Decode(&o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: a document without apiVersion, kind or name: %+v", f, o)
			}
			o.file, o.node = f, &node
			out = append(out, o)
		}
	}
	return out
}

// find decodes the one object of that kind and name into v.
func find(t *testing.T, objs []k8sObject, kind, name string, v any) {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			if err := o.node.Decode(v); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("no %s %q in %s", kind, name, manifestDir)
}

// Test_DeployManifest checks the StatefulSet against what kvselect and its
// image need: a non-root user that owns its data volume, probes on the
// routes meant for them, bounded resources, the token from a Secret, and
// arguments that kvselect's own flag parsing accepts and that agree with
// the ports, volumes and peer names around them.
func Test_DeployManifest(t *testing.T) {
	objs := loadManifests(t)
	var set statefulSet
	find(t, objs, "StatefulSet", "kvselect", &set)
	pod := set.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want kvselect alone", len(pod.Containers))
	}
	c := pod.Containers[0]

	t.Run("runs as the image's non-root user, which owns the data volume", func(t *testing.T) {
		uid, gid := imageUser(t)
		sc := pod.SecurityContext
		switch {
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
			t.Error("pod securityContext.runAsNonRoot is not true")
		case sc.RunAsUser == nil || *sc.RunAsUser != uid:
			t.Errorf("runAsUser = %v, the image runs as %d", deref(sc.RunAsUser), uid)
		case sc.RunAsGroup == nil || *sc.RunAsGroup != gid:
			t.Errorf("runAsGroup = %v, the image runs as group %d", deref(sc.RunAsGroup), gid)
		case sc.FSGroup == nil || *sc.FSGroup != *sc.RunAsGroup:
			t.Errorf("fsGroup = %v, want runAsGroup %d so that the node can write its volume", deref(sc.FSGroup), *sc.RunAsGroup)
		}
		if sc.FSGroupChangePolicy != "OnRootMismatch" || sc.SeccompProfile.Type != "RuntimeDefault" {
			t.Errorf("fsGroupChangePolicy %q, seccompProfile %q", sc.FSGroupChangePolicy, sc.SeccompProfile.Type)
		}
		cs := c.SecurityContext
		if cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.ReadOnlyRootFilesystem == nil ||
			!*cs.ReadOnlyRootFilesystem || !slices.Contains(cs.Capabilities.Drop, "ALL") {
			t.Errorf("container securityContext %+v: want no privilege escalation, a read-only root and every capability dropped", cs)
		}
		if len(c.Command) > 0 {
			t.Errorf("command %q replaces the image's kvselect entrypoint", c.Command)
		}
	})

	t.Run("probes", func(t *testing.T) {
		for _, p := range []struct {
			name  string
			probe *probe
			path  string
		}{
			// Selection readiness (SPEC §3.2): plain /readyz needs a leader,
			// and a Service that routes to ready pods alone would then take
			// selection away with the quorum.
			{"readinessProbe", c.ReadinessProbe, api.PathReadyz + "?" + api.QueryFor + "=" + api.ReadyzForSelection},
			{"livenessProbe", c.LivenessProbe, api.PathHealth},
		} {
			if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path {
				t.Errorf("%s is not an HTTP GET of %s", p.name, p.path)
				continue
			}
			if port := containerPort(t, c, p.probe.HTTPGet.Port); port != flagPort(t, c, "port") {
				t.Errorf("%s asks port %d, kvselect serves HTTP on %d", p.name, port, flagPort(t, c, "port"))
			}
			// A probe carries no token: its route must be open (SPEC §11).
			if access := openAPIAccess(t, "GET", p.probe.HTTPGet.Path); access != api.AccessOpen {
				t.Errorf("%s asks GET %s, whose access class is %q: a probe sends no token", p.name, p.probe.HTTPGet.Path, access)
			}
			// Every query parameter is one the API documents, with a value
			// it takes (an unknown for= is a 400, never a 200).
			if err := openAPIQueryValid(t, "GET", p.probe.HTTPGet.Path); err != nil {
				t.Errorf("%s asks GET %s: %v", p.name, p.probe.HTTPGet.Path, err)
			}
		}
		// /readyz waits up to half a second for the node to apply what it
		// knew to be committed.
		if c.ReadinessProbe != nil && c.ReadinessProbe.TimeoutSeconds < 2 {
			t.Errorf("readinessProbe.timeoutSeconds = %d: /readyz may take 0.5 s", c.ReadinessProbe.TimeoutSeconds)
		}
	})

	t.Run("one pod per node", func(t *testing.T) {
		labels := set.Spec.Template.Metadata.Labels
		if reason := requiredAntiAffinity(pod.Affinity.PodAntiAffinity, labels); reason != "" {
			t.Errorf("the pods' anti-affinity: %s", reason)
		}
	})

	t.Run("GOMEMLIMIT below the memory limit", func(t *testing.T) {
		limit := quantity(t, c.Resources.Limits["memory"])
		var soft string
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				if e.ValueFrom != nil {
					t.Fatalf("GOMEMLIMIT from %+v: a resourceFieldRef gives the limit itself, leaving no headroom", e.ValueFrom)
				}
				soft = e.Value
			}
		}
		if soft == "" {
			t.Fatal("no GOMEMLIMIT: the Go runtime would not collect harder as the heap nears the container's limit")
		}
		b := goMemLimit(t, soft)
		if b >= 0.95*limit || b < 0.8*limit {
			t.Errorf("GOMEMLIMIT=%s is %.0f%% of the memory limit %s; want 80%% to 95%%: below it, headroom for what the Go runtime does not count",
				soft, 100*b/limit, c.Resources.Limits["memory"])
		}
	})

	t.Run("resources", func(t *testing.T) {
		for _, res := range []string{"cpu", "memory"} {
			req, lim := c.Resources.Requests[res], c.Resources.Limits[res]
			if req == "" || lim == "" {
				t.Errorf("%s: request %q, limit %q: want both", res, req, lim)
				continue
			}
			if quantity(t, req) > quantity(t, lim) {
				t.Errorf("%s: request %s above limit %s", res, req, lim)
			}
		}
		for _, e := range c.Env {
			if rf := e.ValueFrom; rf != nil && rf.ResourceFieldRef != nil && rf.ResourceFieldRef.ContainerName != c.Name {
				t.Errorf("env %s reads the resources of container %q", e.Name, rf.ResourceFieldRef.ContainerName)
			}
		}
	})

	// The arguments as the kubelet expands them for pod kvselect-0.
	args, vars := expandArgs(t, c, "kvselect-0", "default")
	tokenFiles := map[string]string{}
	for _, flag := range []string{"auth-token-file", "selection-token-file"} {
		tokenFiles[flag] = flagValue(t, args, flag)
	}

	t.Run("tokens from a Secret", func(t *testing.T) {
		for flag, tokenFile := range tokenFiles {
			mount, ok := mountFor(c, tokenFile)
			if !ok {
				t.Fatalf("--%s=%s is on no volume mount", flag, tokenFile)
			}
			if !mount.ReadOnly {
				t.Errorf("the token volume %s is mounted writable", mount.Name)
			}
			var key string
			for _, v := range pod.Volumes {
				if v.Name != mount.Name {
					continue
				}
				if v.Secret == nil {
					t.Fatalf("volume %s holding --%s is not a Secret", v.Name, flag)
				}
				rel := strings.TrimPrefix(strings.TrimPrefix(tokenFile, mount.MountPath), "/")
				for _, it := range v.Secret.Items {
					if it.Path == rel {
						key = it.Key
					}
				}
				if key == "" {
					t.Fatalf("secret volume %s has no item at %s (--%s=%s)", v.Name, rel, flag, tokenFile)
				}
				// authtoken refuses a world-writable file; the node reads it as
				// the fsGroup, not as its owner.
				if m := v.Secret.DefaultMode; m != nil && (*m&0o002 != 0 || *m&0o040 == 0) {
					t.Errorf("defaultMode %#o: want group-readable and not world-writable", *m)
				}
				var s secret
				find(t, objs, "Secret", v.Secret.SecretName, &s)
				placeholder, ok := s.StringData[key]
				if !ok {
					t.Fatalf("Secret %s has no stringData %q", v.Secret.SecretName, key)
				}
				// The shipped placeholder must never work as a token: a node
				// given it refuses to start.
				if err := authtoken.Validate(strings.TrimSpace(placeholder)); err == nil {
					t.Errorf("the placeholder token %s of Secret %s would be accepted: %q", key, v.Secret.SecretName, placeholder)
				}
			}
			if key == "" {
				t.Fatalf("no volume named %s", mount.Name)
			}
		}
	})

	t.Run("arguments are kvselect's flags and agree with the pod", func(t *testing.T) {
		for _, a := range args {
			if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
				t.Errorf("argument %q: write flags as --name=value", a)
			}
		}
		// The token files are the Secret's at run time; valid ones here.
		local := slices.Clone(args)
		for flag := range tokenFiles {
			tmp := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tmp, []byte(flag+"-t0ken\n"), 0o440); err != nil {
				t.Fatal(err)
			}
			for i, a := range local {
				if strings.HasPrefix(a, "--"+flag+"=") {
					local[i] = "--" + flag + "=" + tmp
				}
			}
		}
		for k, v := range vars {
			if strings.HasPrefix(k, nodeflags.Env.Prefix+"_") {
				t.Setenv(k, v)
			}
		}
		cfg, err := nodeflags.Parse(local)
		if err != nil {
			t.Fatalf("kvselect refuses the manifest's arguments: %v", err)
		}
		if cfg.AuthToken == "" || cfg.SelectionToken == "" {
			t.Error("the node runs without a token")
		}
		if cfg.AuthScope != httpd.ScopeAll {
			t.Errorf("--auth-scope %s: the manifest runs on a network it does not own; keep the default, all", cfg.AuthScope)
		}
		if cfg.Cluster.NodeID != "kvselect-0" {
			t.Errorf("node id %q, want the pod's name", cfg.Cluster.NodeID)
		}
		if _, port, _ := net.SplitHostPort(cfg.Cluster.RaftBind); port != strconv.Itoa(namedPort(t, c, "raft")) {
			t.Errorf("Raft binds %s, the container's raft port is %d", cfg.Cluster.RaftBind, namedPort(t, c, "raft"))
		}
		if cfg.ReplicaSync == nil || !strings.HasSuffix(cfg.ReplicaSync.Listen, ":"+strconv.Itoa(namedPort(t, c, "replica-sync"))) {
			t.Errorf("replica sync %+v, the container's replica-sync port is %d", cfg.ReplicaSync, namedPort(t, c, "replica-sync"))
		}
		// Every node is listed at the name the headless service gives its
		// pod, and this one advertises the name it is listed at.
		domain := set.Spec.ServiceName + ".default.svc.cluster.local"
		if len(cfg.Cluster.InitialCluster) != set.Spec.Replicas {
			t.Errorf("--initial-cluster lists %d nodes for %d replicas", len(cfg.Cluster.InitialCluster), set.Spec.Replicas)
		}
		for i, p := range cfg.Cluster.InitialCluster {
			want := fmt.Sprintf("kvselect-%d.%s:%d", i, domain, namedPort(t, c, "raft"))
			if p.ID != fmt.Sprintf("kvselect-%d", i) || p.RaftAddr != want {
				t.Errorf("--initial-cluster member %d is %s=%s, want kvselect-%d=%s", i, p.ID, p.RaftAddr, i, want)
			}
		}
		if want := fmt.Sprintf("kvselect-0.%s:%d", domain, namedPort(t, c, "raft")); cfg.Cluster.RaftAdvertise != want {
			t.Errorf("--raft-advertise %s, listed at %s", cfg.Cluster.RaftAdvertise, want)
		}
		if want := fmt.Sprintf("kvselect-0.%s:%d", domain, flagPort(t, c, "port")); cfg.Cluster.HTTPAdvertise != want {
			t.Errorf("--http-advertise %s, want %s", cfg.Cluster.HTTPAdvertise, want)
		}
		// The data dir is the volume the StatefulSet claims per pod.
		mount, ok := mountFor(c, filepath.Join(cfg.Cluster.DataDir, "raft.db"))
		claimed := slices.ContainsFunc(set.Spec.VolumeClaimTemplates, func(v claimTemplate) bool { return v.Metadata.Name == mount.Name })
		if !ok || mount.MountPath != cfg.Cluster.DataDir || !claimed || mount.ReadOnly {
			t.Errorf("--data-dir=%s is not the writable mount of a volume claim (mount %+v)", cfg.Cluster.DataDir, mount)
		}
	})

	t.Run("services", func(t *testing.T) {
		var peers, clients service
		find(t, objs, "Service", set.Spec.ServiceName, &peers)
		find(t, objs, "Service", "kvselect", &clients)
		if peers.Spec.ClusterIP != "None" || !peers.Spec.PublishNotReadyAddresses {
			t.Errorf("service %s: want headless, publishing pods before they are ready (Raft needs them)", set.Spec.ServiceName)
		}
		labels := set.Spec.Template.Metadata.Labels
		for _, s := range []service{peers, clients} {
			for k, v := range s.Spec.Selector {
				if labels[k] != v {
					t.Errorf("a service selects %s=%s, the pods are labelled %v", k, v, labels)
				}
			}
		}
		for _, p := range c.Ports {
			if !slices.Contains(peers.Spec.Ports, servicePort{Name: p.Name, Port: p.ContainerPort}) {
				t.Errorf("container port %s %d is not on the headless service", p.Name, p.ContainerPort)
			}
		}
		for _, p := range clients.Spec.Ports {
			if containerPort(t, c, p.TargetPort) != flagPort(t, c, "port") {
				t.Errorf("service kvselect sends port %d to %v, not kvselect's HTTP port", p.Port, p.TargetPort)
			}
		}
	})
}

// Test_DeployNetworkPolicy: Raft and replica sync, authenticated but not
// encrypted, are reachable from the kvselect pods alone (README,
// Authentication); HTTP stays reachable, or clients and probes would be
// cut off.
func Test_DeployNetworkPolicy(t *testing.T) {
	objs := loadManifests(t)
	var set statefulSet
	find(t, objs, "StatefulSet", "kvselect", &set)
	labels := set.Spec.Template.Metadata.Labels
	c := set.Spec.Template.Spec.Containers[0]
	var np networkPolicy
	find(t, objs, "NetworkPolicy", "kvselect-peers", &np)
	// selects reports whether sel picks exactly by labels the pods carry.
	selects := func(sel *labelSelector) bool {
		if sel == nil || len(sel.MatchLabels) == 0 || len(sel.MatchExpressions) > 0 {
			return false
		}
		for k, v := range sel.MatchLabels {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	if !selects(&np.Spec.PodSelector) || !slices.Contains(np.Spec.PolicyTypes, "Ingress") {
		t.Fatalf("the policy does not govern the pods' ingress: podSelector %+v, policyTypes %q", np.Spec.PodSelector, np.Spec.PolicyTypes)
	}
	for _, name := range []string{"http", "raft", "replica-sync"} {
		port := namedPort(t, c, name)
		admitted := 0
		for i, rule := range np.Spec.Ingress {
			opens := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				opens = opens || containerPort(t, c, p.Port) == port
			}
			if !opens {
				continue
			}
			admitted++
			if name == "http" {
				continue
			}
			if len(rule.From) == 0 {
				t.Errorf("ingress rule %d opens the %s port to everyone", i, name)
			}
			for _, from := range rule.From {
				if from.IPBlock != nil || from.NamespaceSelector != nil || !selects(from.PodSelector) {
					t.Errorf("ingress rule %d opens the %s port to %+v, not the kvselect pods alone", i, name, from)
				}
			}
		}
		if admitted == 0 {
			t.Errorf("no ingress rule admits the %s port (%d): the pods could not reach it", name, port)
		}
	}
}

// expandArgs expands $(VAR) in the container's arguments as the kubelet
// does, for a pod of that name in that namespace.
func expandArgs(t *testing.T, c container, podName, namespace string) ([]string, map[string]string) {
	t.Helper()
	vars := map[string]string{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	expand := func(s string) string {
		return ref.ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = expand(e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[e.Name] = podName
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[e.Name] = namespace
		}
	}
	var args []string
	for _, a := range c.Args {
		a = expand(a)
		if m := ref.FindString(a); m != "" {
			t.Errorf("argument %q refers to %s, which the container does not define", a, m)
		}
		args = append(args, a)
	}
	return args, vars
}

// flagValue is the value of --name=value in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("no --%s in %q", name, args)
	return ""
}

// flagPort is the port a flag of the container's arguments gives.
func flagPort(t *testing.T, c container, name string) int {
	t.Helper()
	var v string
	for _, a := range c.Args {
		if s, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = s
		}
	}
	p, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("--%s=%q is no port", name, v)
	}
	return p
}

// containerPort resolves a probe's or service's port: a number, or the
// name of one of the container's ports.
func containerPort(t *testing.T, c container, port any) int {
	t.Helper()
	switch p := port.(type) {
	case int:
		return p
	case string:
		return namedPort(t, c, p)
	}
	t.Fatalf("port %v (%T)", port, port)
	return 0
}

func namedPort(t *testing.T, c container, name string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("the container has no port named %q", name)
	return 0
}

// mountFor returns the volume mount that holds file.
func mountFor(c container, file string) (m volumeMount, ok bool) {
	for _, vm := range c.VolumeMounts {
		if strings.HasPrefix(file, strings.TrimSuffix(vm.MountPath, "/")+"/") && len(vm.MountPath) > len(m.MountPath) {
			m, ok = vm, true
		}
	}
	return m, ok
}

// quantity parses the Kubernetes quantities the manifest uses (500m, 2,
// 512Mi, 2Gi, 1G) into a number to compare.
func quantity(t *testing.T, q string) float64 {
	t.Helper()
	suffixes := []struct {
		s string
		f float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"m", 1e-3}}
	f := 1.0
	for _, s := range suffixes {
		if n, ok := strings.CutSuffix(q, s.s); ok {
			q, f = n, s.f
			break
		}
	}
	v, err := strconv.ParseFloat(q, 64)
	if err != nil {
		t.Fatalf("quantity %q: %v", q, err)
	}
	return v * f
}

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// dockerInstructions returns the Dockerfile's instructions, continuation
// lines joined and comments dropped.
func dockerInstructions(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || trimmed == "" && cur.Len() == 0 {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	return out
}

// imageUser is the numeric user and group the image's last stage runs as.
func imageUser(t *testing.T) (uid, gid int64) {
	t.Helper()
	var user string
	for _, ins := range dockerInstructions(t) {
		if u, ok := strings.CutPrefix(ins, "USER "); ok {
			user = u
		}
	}
	u, g, _ := strings.Cut(user, ":")
	uid, err1 := strconv.ParseInt(u, 10, 64)
	gid, err2 := strconv.ParseInt(g, 10, 64)
	if err1 != nil || err2 != nil || uid == 0 {
		t.Fatalf("the image's USER is %q: want a numeric, non-root uid:gid, which Kubernetes can check", user)
	}
	return uid, gid
}

// Test_DeployImage checks deploy/Dockerfile and .dockerignore: the build
// fetches only the modules the commands import, runs kvselect, and its
// context leaves out outputs, data dirs and .git but nothing the build
// needs.
func Test_DeployImage(t *testing.T) {
	var pkgs []string
	var entrypoint string
	copiesContext := false
	for _, ins := range dockerInstructions(t) {
		op, rest, _ := strings.Cut(ins, " ")
		switch strings.ToUpper(op) {
		case "RUN":
			// Without arguments it fetches every module go.mod lists,
			// those no build imports too (go-zeromq/goczmq).
			if m := regexp.MustCompile(`go mod download((?: -\S+)*)(?: *(?:$|&&|;|\|))`).FindString(rest); m != "" {
				t.Errorf("RUN %s: %q fetches modules the build never needs; let go build fetch what it imports", rest, m)
			}
			if _, build, ok := strings.Cut(rest, "go build "); ok {
				for _, f := range strings.Fields(build) {
					if strings.HasPrefix(f, "./") {
						pkgs = append(pkgs, f)
					}
				}
			}
		case "COPY":
			copiesContext = copiesContext || strings.HasPrefix(rest, ". ")
		case "ENTRYPOINT":
			entrypoint = rest
		}
	}
	if !slices.Contains(pkgs, "./cmd/kvselect") {
		t.Fatalf("no go build of ./cmd/kvselect in %s (packages %q)", dockerfile, pkgs)
	}
	if entrypoint != `["/usr/local/bin/kvselect"]` {
		t.Errorf("ENTRYPOINT %s: the manifest passes kvselect's flags as args", entrypoint)
	}
	if !copiesContext {
		t.Fatalf("the Dockerfile does not COPY the context; .dockerignore would not matter")
	}
	imageUser(t)

	rules := readDockerignore(t)
	for _, p := range []string{".git/HEAD", "bin/kvselect", "kvselect", "kvbench", "kvselect-data/raft.db",
		"run/n1/raft.db", "server/kvselect-data/raft.db", "kvselect.test", "http/http.test", "cover.out",
		"bench/results/go-bench.txt", "bench/jepsen/summary.json", "jepsen/go.mod"} {
		if !ignored(rules, p) {
			t.Errorf(".dockerignore sends %s into the build context", p)
		}
	}
	need := append([]string{"go.mod", "go.sum"}, buildFiles(t, pkgs)...)
	for _, p := range need {
		if ignored(rules, p) {
			t.Errorf(".dockerignore leaves out %s, which go build %s needs", p, strings.Join(pkgs, " "))
		}
	}
	if len(need) < 20 {
		t.Fatalf("only %d files found for the build: %q", len(need), need)
	}
}

// readDockerignore returns .dockerignore's patterns, cleaned as Docker
// cleans them (relative to the context, no leading or trailing slash).
func readDockerignore(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dockerignore)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are beyond this test's matcher; teach it first", line)
		}
		rules = append(rules, strings.TrimPrefix(path.Clean("/"+line), "/"))
	}
	return rules
}

// ignored reports whether Docker leaves p (slash-separated, relative to
// the context) out: a pattern matches it or one of its parent dirs; "**"
// matches any number of dirs.
func ignored(rules []string, p string) bool {
	parts := strings.Split(p, "/")
	for _, r := range rules {
		for n := 1; n <= len(parts); n++ {
			if matchSegments(strings.Split(r, "/"), parts[:n]) {
				return true
			}
		}
	}
	return false
}

func matchSegments(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchSegments(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	ok, err := path.Match(pat[0], name[0])
	return err == nil && ok && matchSegments(pat[1:], name[1:])
}

// buildFiles lists, relative to the repository, the Go and embedded files
// of this module that go build of pkgs compiles.
func buildFiles(t *testing.T, pkgs []string) []string {
	t.Helper()
	tmpl := `{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}`
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append([]string{"list", "-deps", "-f", tmpl}, pkgs...)...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(pkgs, " "), err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("%s is outside the repository", f)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// openAPIAccess is the x-kvselect-access of an operation in the API's
// OpenAPI document ("" when it has none); path may carry a query.
func openAPIAccess(t *testing.T, method, path string) string {
	t.Helper()
	doc, err := schemacheck.ParseDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	path, _, _ = strings.Cut(path, "?")
	for _, op := range doc.Operations() {
		if op.Method == method && op.Path == path {
			access, _ := op.Spec["x-kvselect-access"].(string)
			return access
		}
	}
	return ""
}

// openAPIQueryValid checks the query of path (as a probe asks it) against
// the operation's documented query parameters: each is documented, and
// its value is in the parameter's enum when it has one.
func openAPIQueryValid(t *testing.T, method, target string) error {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	doc, err := schemacheck.ParseDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	op, ok := doc.Find(method, u.Path)
	if !ok {
		return fmt.Errorf("no operation %s %s in the API document", method, u.Path)
	}
	params, _ := op.Spec["parameters"].([]any)
	for name, values := range u.Query() {
		var spec map[string]any
		for _, p := range params {
			if m, _ := p.(map[string]any); m["in"] == "query" && m["name"] == name {
				spec = m
			}
		}
		if spec == nil {
			return fmt.Errorf("query parameter %q is not documented", name)
		}
		sch, _ := spec["schema"].(map[string]any)
		enum, _ := sch["enum"].([]any)
		for _, v := range values {
			if len(enum) > 0 && !slices.Contains(enum, any(v)) {
				return fmt.Errorf("%s=%q is none of %v", name, v, enum)
			}
		}
	}
	return nil
}

// requiredAntiAffinity says what keeps a from placing each pod labelled
// labels on a node of its own, "" when nothing does.
func requiredAntiAffinity(a *podAntiAffinity, labels map[string]string) string {
	if a == nil {
		return "none"
	}
	for _, term := range a.Required {
		if term.TopologyKey != "kubernetes.io/hostname" {
			continue
		}
		sel := term.LabelSelector
		if len(sel.MatchLabels) == 0 || len(sel.MatchExpressions) > 0 {
			continue
		}
		all := true
		for k, v := range sel.MatchLabels {
			all = all && labels[k] == v
		}
		if all {
			return ""
		}
	}
	return fmt.Sprintf("no requiredDuringSchedulingIgnoredDuringExecution term on kubernetes.io/hostname selecting the pods (%v): "+
		"two members on one node lose the quorum together", labels)
}

// goMemLimit parses a GOMEMLIMIT value as the Go runtime does: a number
// of bytes, optionally followed by B, KiB, MiB, GiB or TiB.
func goMemLimit(t *testing.T, v string) float64 {
	t.Helper()
	f := 1.0
	for _, u := range []struct {
		s string
		f float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if n, ok := strings.CutSuffix(v, u.s); ok {
			v, f = n, u.f
			break
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("GOMEMLIMIT %q: the Go runtime takes bytes with an optional B, KiB, MiB, GiB or TiB: %v", v, err)
	}
	return float64(n) * f
}

// Test_DeployServiceMonitor: the Prometheus operator's ServiceMonitor
// scrapes /metrics on kvselect's HTTP port through exactly one Service,
// one that lists every pod (ready or not), and sends a token the pods
// accept there, from the Secret they read theirs from.
func Test_DeployServiceMonitor(t *testing.T) {
	objs := loadManifests(t)
	var set statefulSet
	find(t, objs, "StatefulSet", "kvselect", &set)
	c := set.Spec.Template.Spec.Containers[0]
	var sm serviceMonitor
	var smObj k8sObject
	for _, o := range objs {
		if o.Kind == "ServiceMonitor" {
			smObj = o
		}
	}
	if smObj.Kind == "" {
		t.Fatalf("no ServiceMonitor under %s", manifestDir)
	}
	if smObj.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion %s, want monitoring.coreos.com/v1", smObj.APIVersion)
	}
	if err := smObj.node.Decode(&sm); err != nil {
		t.Fatal(err)
	}
	var scraped []string
	for _, o := range objs {
		if o.Kind != "Service" {
			continue
		}
		var meta objectMeta
		if err := o.node.Decode(&meta); err != nil {
			t.Fatal(err)
		}
		all := len(sm.Spec.Selector.MatchLabels) > 0 && len(sm.Spec.Selector.MatchExpressions) == 0
		for k, v := range sm.Spec.Selector.MatchLabels {
			all = all && meta.Metadata.Labels[k] == v
		}
		if all {
			scraped = append(scraped, o.Metadata.Name)
		}
	}
	if len(scraped) != 1 {
		t.Fatalf("the ServiceMonitor selects the services %q: want one, or every pod is scraped once per service", scraped)
	}
	var svc service
	find(t, objs, "Service", scraped[0], &svc)
	if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("the ServiceMonitor scrapes service %s, which is not the headless one listing every pod ready or not", scraped[0])
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want one", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	var port int
	for _, p := range svc.Spec.Ports {
		if p.Name == ep.Port {
			port = p.Port
		}
	}
	if port != flagPort(t, c, "port") {
		t.Errorf("the ServiceMonitor scrapes port %q (%d) of service %s, kvselect serves HTTP on %d", ep.Port, port, scraped[0], flagPort(t, c, "port"))
	}
	if ep.Path != api.PathMetrics || (ep.Scheme != "" && ep.Scheme != "http") {
		t.Errorf("the ServiceMonitor scrapes %s://...%s, want http ...%s", ep.Scheme, ep.Path, api.PathMetrics)
	}
	// The pods guard /metrics with --auth-scope all; the scrape must send
	// a token they accept there, from their own Secret.
	access := openAPIAccess(t, "GET", api.PathMetrics)
	if access == api.AccessOpen {
		return
	}
	args, _ := expandArgs(t, c, "kvselect-0", "default")
	accepted := map[string]bool{} // Secret keys of the tokens /metrics accepts
	for _, v := range set.Spec.Template.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != "kvselect-auth" {
			continue
		}
		for _, it := range v.Secret.Items {
			for _, flag := range []string{"auth-token-file", "selection-token-file"} {
				if flag == "selection-token-file" && access != api.AccessSelection && access != api.AccessWorker {
					continue
				}
				if m, ok := mountFor(c, flagValue(t, args, flag)); ok && m.Name == v.Name &&
					strings.TrimPrefix(flagValue(t, args, flag), m.MountPath+"/") == it.Path {
					accepted[it.Key] = true
				}
			}
		}
	}
	a := ep.Authorization
	if a == nil || a.Type != "Bearer" || a.Credentials.Name != "kvselect-auth" || !accepted[a.Credentials.Key] {
		t.Errorf("GET /metrics is %q access: the scrape must send the Bearer token of Secret kvselect-auth, key one of %v; it has %+v",
			access, accepted, a)
	}
	if a != nil && a.Credentials.Key != "selection-token" && accepted["selection-token"] {
		t.Errorf("the scrape sends key %q; the selection token, which can do less, suffices", a.Credentials.Key)
	}
}

// kustomization is the part of a kustomization.yaml the tests read.
type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Components []string `yaml:"components"`
	Patches    []struct {
		Target struct {
			Group   string `yaml:"group"`
			Version string `yaml:"version"`
			Kind    string `yaml:"kind"`
			Name    string `yaml:"name"`
		} `yaml:"target"`
		Patch string `yaml:"patch"`
		Path  string `yaml:"path"`
	} `yaml:"patches"`
}

// readKustomization reads dir's kustomization.yaml, refusing fields the
// tests do not know (kubectl would take them; the checks below would
// not see them).
func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, kustomizationFile))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&k); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return k
}

// Test_DeployKustomizations checks the kustomize layout kubectl apply -k
// builds: the base holds the cluster but never the token Secret; every
// reference resolves as kustomize resolves it (files inside the
// kustomization's directory, directories that hold a kustomization and do
// not contain the referrer); every manifest is reachable from a variant;
// the kind overlay relaxes exactly the anti-affinity, to a preference.
func Test_DeployKustomizations(t *testing.T) {
	base := filepath.Join(manifestDir, "base")
	variants := []string{
		base, // production: one pod per node
		filepath.Join(manifestDir, "overlays", "kind"),       // one-node dev clusters
		filepath.Join(manifestDir, "overlays", "monitoring"), // the base and a ServiceMonitor
	}
	reached := map[string]bool{}
	var walk func(dir string, component bool, seen []string)
	walk = func(dir string, component bool, seen []string) {
		k := readKustomization(t, dir)
		wantAPI, wantKind := "kustomize.config.k8s.io/v1beta1", "Kustomization"
		if component {
			wantAPI, wantKind = "kustomize.config.k8s.io/v1alpha1", "Component"
		}
		if k.APIVersion != wantAPI || k.Kind != wantKind {
			t.Errorf("%s: %s %s, want %s %s", dir, k.APIVersion, k.Kind, wantAPI, wantKind)
		}
		refs := append(slices.Clone(k.Resources), k.Components...)
		for i, ref := range refs {
			p := filepath.Join(dir, ref)
			st, err := os.Stat(p)
			if err != nil {
				t.Errorf("%s refers to %s: %v", dir, ref, err)
				continue
			}
			if !st.IsDir() {
				// kustomize loads files from inside the kustomization's
				// own directory only (LoadRestrictionsRootOnly).
				if rel, err := filepath.Rel(dir, p); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s refers to the file %s outside its directory: kustomize refuses it", dir, ref)
				}
				if i >= len(k.Resources) {
					t.Errorf("%s lists the file %s as a component", dir, ref)
				}
				reached[p] = true
				continue
			}
			// A directory is a kustomization kustomize builds first; it may
			// not contain one on the way here (kustomize: cycle detected).
			for _, s := range append(seen, dir) {
				if rel, err := filepath.Rel(p, s); err == nil && !strings.HasPrefix(rel, "..") {
					t.Errorf("%s refers to %s, which contains %s: kustomize refuses the cycle", dir, ref, s)
					return
				}
			}
			walk(p, i >= len(k.Resources), append(seen, dir))
		}
	}
	for _, dir := range variants {
		walk(dir, false, nil)
	}
	for _, f := range manifestFiles(t) {
		// The Secret stays out of every variant: applying one again must
		// never reset the tokens.
		if filepath.Base(f) == "kvselect-auth.yaml" {
			if reached[f] {
				t.Errorf("a variant applies %s: applying it again would reset the tokens", f)
			}
			continue
		}
		if !reached[f] {
			t.Errorf("%s is in no variant's kustomization", f)
		}
	}
	if k := readKustomization(t, base); !slices.Contains(k.Resources, "kvselect.yaml") || len(k.Patches) > 0 {
		t.Errorf("the base: resources %q, %d patches; want kvselect.yaml as it is", k.Resources, len(k.Patches))
	}

	// The kind overlay's patch, applied to the base's StatefulSet.
	kind := readKustomization(t, filepath.Join(manifestDir, "overlays", "kind"))
	if len(kind.Patches) != 1 {
		t.Fatalf("overlays/kind has %d patches, want the anti-affinity's alone", len(kind.Patches))
	}
	p := kind.Patches[0]
	if p.Target.Kind != "StatefulSet" || p.Target.Name != "kvselect" || p.Path != "" {
		t.Fatalf("overlays/kind patches %+v (path %q), want the StatefulSet kvselect, inline", p.Target, p.Path)
	}
	var ops []struct {
		Op    string    `yaml:"op"`
		Path  string    `yaml:"path"`
		Value yaml.Node `yaml:"value"`
	}
	if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
		t.Fatalf("overlays/kind's patch is no JSON patch: %v", err)
	}
	const affinityPath = "/spec/template/spec/affinity/podAntiAffinity"
	if len(ops) != 1 || ops[0].Op != "replace" || ops[0].Path != affinityPath {
		t.Fatalf("overlays/kind's patch %+v: want one replace of %s", ops, affinityPath)
	}
	objs := loadManifests(t)
	var set statefulSet
	find(t, objs, "StatefulSet", "kvselect", &set)
	if set.Spec.Template.Spec.Affinity.PodAntiAffinity == nil {
		t.Fatalf("the base has no %s for the kind overlay to replace: kustomize would fail", affinityPath)
	}
	var relaxed podAntiAffinity
	if err := ops[0].Value.Decode(&relaxed); err != nil {
		t.Fatal(err)
	}
	labels := set.Spec.Template.Metadata.Labels
	if len(relaxed.Required) > 0 || requiredAntiAffinity(&relaxed, labels) == "" {
		t.Errorf("overlays/kind still requires one pod per node: %+v", relaxed)
	}
	spread := false
	for _, pref := range relaxed.Preferred {
		relaxedTerm := podAntiAffinity{Required: []podAffinityTerm{pref.PodAffinityTerm}}
		spread = spread || pref.Weight > 0 && requiredAntiAffinity(&relaxedTerm, labels) == ""
	}
	if !spread {
		t.Errorf("overlays/kind no longer prefers spreading the pods over nodes: %+v", relaxed)
	}
}

// Test_DeployKustomizeBuild builds each variant with kubectl kustomize,
// as kubectl apply -k would, where kubectl is installed (nothing is
// installed or fetched for it; Test_DeployKustomizations checks the
// layout without it): each builds, none holds the token Secret, the
// ServiceMonitor is the monitoring variant's alone, and the pods are
// required to spread over nodes except on kind.
func Test_DeployKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	for _, v := range []struct {
		dir            string
		spread         bool // one pod per node, required
		serviceMonitor bool
	}{
		{"base", true, false},
		{"overlays/kind", false, false},
		{"overlays/monitoring", true, true},
	} {
		t.Run(v.dir, func(t *testing.T) {
			out, err := exec.Command(kubectl, "kustomize", filepath.Join(manifestDir, filepath.FromSlash(v.dir))).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", v.dir, err, out)
			}
			dec := yaml.NewDecoder(bytes.NewReader(out))
			kinds := map[string]int{}
			var set statefulSet
			for {
				var node yaml.Node
				if err := dec.Decode(&node); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				var o k8sObject
				if err := node.Decode(&o); err != nil {
					t.Fatal(err)
				}
				kinds[o.Kind]++
				if o.Kind == "StatefulSet" {
					if err := node.Decode(&set); err != nil {
						t.Fatal(err)
					}
				}
			}
			if kinds["StatefulSet"] != 1 || kinds["Secret"] != 0 || (kinds["ServiceMonitor"] == 1) != v.serviceMonitor {
				t.Errorf("objects %v: want one StatefulSet, no Secret, a ServiceMonitor %v", kinds, v.serviceMonitor)
			}
			reason := requiredAntiAffinity(set.Spec.Template.Spec.Affinity.PodAntiAffinity, set.Spec.Template.Metadata.Labels)
			if (reason == "") != v.spread {
				t.Errorf("one pod per node required: %v, want %v (%s)", reason == "", v.spread, reason)
			}
		})
	}
}
