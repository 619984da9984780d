package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/stream"
)

// scaledObject mirrors the fields of KEDA's ScaledObject (keda.sh/v1alpha1,
// github.com/kedacore/keda/v2/apis/keda/v1alpha1) that the deployment sets.
// Decoding is strict, so a misspelt or misplaced field fails the test.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// rendered is a kustomization's output decoded into the official types.
type rendered struct {
	statefulSets  []appsv1.StatefulSet
	services      []corev1.Service
	pdbs          []policyv1.PodDisruptionBudget
	configMaps    map[string]corev1.ConfigMap
	secrets       map[string]corev1.Secret
	jobs          []batchv1.Job
	scaledObjects []scaledObject
}

// renderK8s runs kustomize on dir (under deploy/k8s) and decodes every
// object strictly; an object of another kind fails the test.
func renderK8s(t *testing.T, dir string) rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := rendered{configMaps: map[string]corev1.ConfigMap{}, secrets: map[string]corev1.Secret{}}
	for _, res := range m.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		decode := func(v any) {
			if err := yaml.UnmarshalStrict(y, v); err != nil {
				t.Errorf("%s %s: %v", res.GetKind(), res.GetName(), err)
			}
		}
		switch gvk := res.GetGvk(); gvk.ApiVersion() + " " + gvk.Kind {
		case "apps/v1 StatefulSet":
			var o appsv1.StatefulSet
			decode(&o)
			r.statefulSets = append(r.statefulSets, o)
		case "v1 Service":
			var o corev1.Service
			decode(&o)
			r.services = append(r.services, o)
		case "policy/v1 PodDisruptionBudget":
			var o policyv1.PodDisruptionBudget
			decode(&o)
			r.pdbs = append(r.pdbs, o)
		case "v1 ConfigMap":
			var o corev1.ConfigMap
			decode(&o)
			r.configMaps[o.Name] = o
		case "v1 Secret":
			var o corev1.Secret
			decode(&o)
			r.secrets[o.Name] = o
		case "batch/v1 Job":
			var o batchv1.Job
			decode(&o)
			r.jobs = append(r.jobs, o)
		case "keda.sh/v1alpha1 ScaledObject":
			var o scaledObject
			decode(&o)
			r.scaledObjects = append(r.scaledObjects, o)
		default:
			t.Errorf("%s %s: kind not expected in the deployment", gvk, res.GetName())
		}
	}
	return r
}

// stagesOf returns the DROPSTREAM_STAGES of a StatefulSet's container.
func stagesOf(s appsv1.StatefulSet) []string {
	for _, e := range s.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "DROPSTREAM_STAGES" {
			return strings.Split(e.Value, ",")
		}
	}
	return nil
}

// TestK8s_deploysAndScalesEveryStageOfTheBinary renders deploy/k8s and its
// Redis Cluster overlay and checks them against the binary's own list of
// stages and services: every one runs in some StatefulSet; a StatefulSet of
// stages has a KEDA ScaledObject with one trigger per partition stream of
// each of its consumer groups (the stream keys the stream package writes);
// a StatefulSet of services has fixed replicas; every pod has the probes,
// its pod name as DROPSTREAM_INSTANCE, a grace period above the shutdown
// bound, and a PodDisruptionBudget.
func TestK8s_deploysAndScalesEveryStageOfTheBinary(t *testing.T) {
	listed := binaryStages(t)
	bound := api.DefaultShutdownTimeout + stream.RunnerConfig{}.WithDefaults("stage").HandlerTimeout
	alerts, err := os.ReadFile(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, trigger, addressKey string
		redisURL                 func(string) bool
	}{
		{"k8s/base", "redis-streams", "address", func(u string) bool { return strings.HasPrefix(u, "redis://") }},
		{"k8s/cluster", "redis-cluster-streams", "addresses", func(u string) bool { return strings.Count(u, ",") >= 2 }},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			r := renderK8s(t, tc.dir)
			if len(r.statefulSets) == 0 {
				t.Fatal("no StatefulSet")
			}
			var env corev1.ConfigMap
			for name, cm := range r.configMaps {
				if strings.HasPrefix(name, "dropstream-env-") {
					env = cm
				}
				if strings.HasPrefix(name, "dropstream-alerts-") && cm.Data["alerts.yml"] != string(alerts) {
					t.Errorf("ConfigMap %s: alerts.yml differs from deploy/prometheus/alerts.yml", name)
				}
			}
			if !tc.redisURL(env.Data["DROPSTREAM_REDIS_URL"]) {
				t.Errorf("DROPSTREAM_REDIS_URL %q does not fit %s", env.Data["DROPSTREAM_REDIS_URL"], tc.dir)
			}

			runBy := map[string]string{} // stage → StatefulSet
			for _, s := range r.statefulSets {
				checkPod(t, r, s.Name, s.Spec.Template, bound)
				if !slices.ContainsFunc(r.services, func(svc corev1.Service) bool { return svc.Name == s.Spec.ServiceName }) {
					t.Errorf("StatefulSet %s: serviceName %q is no Service", s.Name, s.Spec.ServiceName)
				}
				if !slices.ContainsFunc(r.pdbs, func(p policyv1.PodDisruptionBudget) bool { return selects(p.Spec.Selector, s.Spec.Template.Labels) }) {
					t.Errorf("StatefulSet %s: no PodDisruptionBudget selects its pods", s.Name)
				}
				for _, st := range stagesOf(s) {
					if other, ok := runBy[st]; ok {
						t.Errorf("%s runs in both %s and %s", st, other, s.Name)
					}
					runBy[st] = s.Name
				}
			}

			scaled := map[string]*scaledObject{}
			for i, so := range r.scaledObjects {
				ref := so.Spec.ScaleTargetRef
				if ref.APIVersion != "apps/v1" || ref.Kind != "StatefulSet" {
					t.Errorf("ScaledObject %s targets %s %s, want a StatefulSet", so.Name, ref.APIVersion, ref.Kind)
				}
				if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount < 1 || so.Spec.MaxReplicaCount == nil {
					t.Errorf("ScaledObject %s: want minReplicaCount ≥ 1 (a stage never scales to zero) and a maxReplicaCount", so.Name)
				}
				scaled[ref.Name] = &r.scaledObjects[i]
			}

			partitions := env.Data["DROPSTREAM_PARTITIONS"]
			want := map[string][]string{} // StatefulSet → "stream group" of each trigger it needs
			for _, st := range listed {
				set, ok := runBy[st.Name]
				delete(runBy, st.Name)
				switch {
				case !ok && !exampleStages[st.Name]:
					t.Errorf("no StatefulSet runs the %s %s", st.Kind, st.Name)
				case ok && st.Kind == "stage":
					if partitions != "" && partitions != strconv.Itoa(st.Partitions) {
						t.Errorf("%s: the binary lists %d partitions, the deployment sets %s", st.Name, st.Partitions, partitions)
					}
					topic := stream.Topic{Flow: st.Flow, Name: st.Topic, Partitions: st.Partitions}
					for p := range st.Partitions {
						want[set] = append(want[set], topic.Stream(p)+" "+st.Group)
					}
				}
			}
			for st, set := range runBy {
				t.Errorf("StatefulSet %s runs %q, which the binary does not have", set, st)
			}

			for _, s := range r.statefulSets {
				so := scaled[s.Name]
				switch {
				case want[s.Name] == nil && so != nil:
					t.Errorf("StatefulSet %s runs no consumer group but KEDA scales it", s.Name)
				case want[s.Name] == nil && (s.Spec.Replicas == nil || *s.Spec.Replicas < 1):
					t.Errorf("StatefulSet %s: want fixed replicas", s.Name)
				case want[s.Name] != nil && so == nil:
					t.Errorf("StatefulSet %s runs consumer groups and has no ScaledObject", s.Name)
				case want[s.Name] != nil:
					var got []string
					for _, tr := range so.Spec.Triggers {
						md := tr.Metadata
						if tr.Type != tc.trigger || md[tc.addressKey] == "" || md["lagCount"] == "" {
							t.Errorf("ScaledObject %s: trigger %s %v, want %s on %s with a lagCount", so.Name, tr.Type, md, tc.trigger, tc.addressKey)
						}
						got = append(got, md["stream"]+" "+md["consumerGroup"])
					}
					slices.Sort(got)
					slices.Sort(want[s.Name])
					if !slices.Equal(got, want[s.Name]) {
						t.Errorf("ScaledObject %s triggers on\n%s\nwant one per partition stream and group:\n%s",
							so.Name, strings.Join(got, "\n"), strings.Join(want[s.Name], "\n"))
					}
				}
			}

			var apiService bool
			for _, svc := range r.services {
				if svc.Spec.ClusterIP == corev1.ClusterIPNone {
					continue
				}
				for _, s := range r.statefulSets {
					if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) &&
						slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.TargetPort.String() == "http" }) {
						apiService = true
					}
				}
			}
			if !apiService {
				t.Error("no Service (with a cluster IP) sends traffic to the API port of a dropstream pod")
			}
			if len(r.jobs) != 1 || r.jobs[0].Spec.Template.Spec.Containers[0].Args[0] != "migrate" {
				t.Errorf("want one Job running migrate, have %d", len(r.jobs))
			}
			for _, j := range r.jobs {
				checkRefs(t, r, j.Name, j.Spec.Template.Spec.Containers[0])
			}
		})
	}
}

// checkPod checks what every dropstream pod needs: probes on the API
// port, the instance from the pod name, the grace period, and references
// to ConfigMaps and Secrets of the kustomization.
func checkPod(t *testing.T, r rendered, name string, tpl corev1.PodTemplateSpec, bound time.Duration) {
	t.Helper()
	spec := tpl.Spec
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= bound {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want more than the shutdown bound %s", name, g, bound)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", name, len(spec.Containers))
	}
	c := spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Errorf("%s: args %v, want run", name, c.Args)
	}
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.ReadinessProbe, api.PathReadyz}, {c.LivenessProbe, api.PathHealthz}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path ||
			!slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
				return cp.Name == p.probe.HTTPGet.Port.String() && cp.ContainerPort == 8080
			}) {
			t.Errorf("%s: want an HTTP probe of %s on the API port 8080", name, p.path)
		}
	}
	var instance bool
	for _, e := range c.Env {
		if e.Name == "DROPSTREAM_INSTANCE" {
			instance = e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		}
	}
	if !instance {
		t.Errorf("%s: want DROPSTREAM_INSTANCE from the pod name (fieldRef metadata.name)", name)
	}
	checkRefs(t, r, name, c)
}

// checkRefs checks that a container's ConfigMap and Secret references name
// objects of the kustomization (generated names carry a hash suffix).
func checkRefs(t *testing.T, r rendered, name string, c corev1.Container) {
	t.Helper()
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			if _, ok := r.configMaps[ef.ConfigMapRef.Name]; !ok {
				t.Errorf("%s: envFrom ConfigMap %s is not in the kustomization", name, ef.ConfigMapRef.Name)
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if ref := e.ValueFrom.SecretKeyRef; ref != nil {
			if _, ok := r.secrets[ref.Name].Data[ref.Key]; !ok {
				t.Errorf("%s: %s from Secret %s key %s, not in the kustomization", name, e.Name, ref.Name, ref.Key)
			}
		}
		if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
			if _, ok := r.configMaps[ref.Name].Data[ref.Key]; !ok {
				t.Errorf("%s: %s from ConfigMap %s key %s, not in the kustomization", name, e.Name, ref.Name, ref.Key)
			}
		}
	}
}

func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(l))
}
