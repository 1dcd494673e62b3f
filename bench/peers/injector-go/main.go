// Command injector-go is the benchmark's peer: a controller-runtime
// mutating webhook that does the same injection as Portcullis with
// services/injector/tests/data/config.yaml (a native sidecar with a
// volume, its mounts and a pull secret; two image rewrites; four
// defaults; a status annotation), written the way controller-runtime's
// documentation shows: decode the typed Pod, mutate it, marshal it, and
// let admission.PatchResponseFromRaw diff the two.
//
// It listens on --listen (port 0 allowed) and prints "webhook=ADDR" once
// bound, as the Portcullis servers do, so that nothing picks a port in
// advance.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const statusAnnotation = "portcullis.dev/status"

type rewrite struct{ From, To string }

type status struct {
	Templates        []string            `json:"templates"`
	InitContainers   []string            `json:"initContainers,omitempty"`
	Volumes          []string            `json:"volumes,omitempty"`
	VolumeMounts     map[string][]string `json:"volumeMounts,omitempty"`
	ImagePullSecrets []string            `json:"imagePullSecrets,omitempty"`
	Images           map[string]rewrite  `json:"images,omitempty"`
}

var rules = [][2]string{
	{"docker.io/", "mirror.example.com/dockerhub/"},
	{"ghcr.io/", "mirror.example.com/ghcr/"},
}

// normalise gives the image's full name (docker.io/library/nginx:1) as the
// container runtime reads a short one.
func normalise(image string) string {
	first, _, found := strings.Cut(image, "/")
	if !found {
		return "docker.io/library/" + image
	}
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io/" + image
	}
	return image
}

func rewriteImage(image string) (string, bool) {
	name := normalise(image)
	for _, r := range rules {
		if rest, ok := strings.CutPrefix(name, r[0]); ok {
			out := r[1] + rest
			return out, out != image
		}
	}
	return "", false
}

type injector struct{ decoder admission.Decoder }

func (i *injector) Handle(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := i.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Annotations["portcullis.dev/inject"] == "false" || pod.Annotations["kubernetes.io/config.mirror"] != "" {
		return admission.Allowed("")
	}
	st := status{VolumeMounts: map[string][]string{}, Images: map[string]rewrite{}}
	spec := &pod.Spec
	if !spec.HostNetwork {
		always := corev1.ContainerRestartPolicyAlways
		sidecar := corev1.Container{
			Name:          "proxy-init",
			Image:         "ghcr.io/example/proxy-init:v1.2.0",
			RestartPolicy: &always,
			Ports:         []corev1.ContainerPort{{ContainerPort: 15001, Name: "proxy"}},
		}
		spec.InitContainers = append([]corev1.Container{sidecar}, spec.InitContainers...)
		st.InitContainers = append(st.InitContainers, sidecar.Name)
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name:         "proxy-certs",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
		})
		st.Volumes = append(st.Volumes, "proxy-certs")
		for c := range spec.Containers {
			spec.Containers[c].VolumeMounts = append(spec.Containers[c].VolumeMounts,
				corev1.VolumeMount{Name: "proxy-certs", MountPath: "/etc/proxy/certs", ReadOnly: true})
			st.VolumeMounts[spec.Containers[c].Name] = []string{"proxy-certs"}
		}
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: "mirror-pull"})
		st.ImagePullSecrets = append(st.ImagePullSecrets, "mirror-pull")
		st.Templates = append(st.Templates, "proxy")
	}
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for c := range list {
			if to, ok := rewriteImage(list[c].Image); ok {
				st.Images[list[c].Name] = rewrite{From: list[c].Image, To: to}
				list[c].Image = to
			}
			list[c].ImagePullPolicy = corev1.PullAlways
		}
	}
	links := false
	spec.EnableServiceLinks = &links
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if _, ok := pod.Labels["portcullis.dev/injected"]; !ok {
		pod.Labels["portcullis.dev/injected"] = "true"
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if _, ok := pod.Annotations["example.com/cost-center"]; !ok {
		pod.Annotations["example.com/cost-center"] = "platform"
	}
	text, err := json.Marshal(st)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	pod.Annotations[statusAnnotation] = string(text)
	marshaled, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, marshaled)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	certFile := flag.String("tls-cert-file", "", "PEM certificate")
	keyFile := flag.String("tls-key-file", "", "PEM key")
	flag.Parse()
	// Portcullis logs nothing per request at its default level; neither
	// does the peer.
	ctrllog.SetLogger(logr.Discard())
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "injector-go:", err)
		os.Exit(1)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, "injector-go:", err)
		os.Exit(1)
	}
	webhook := &admission.Webhook{Handler: &injector{decoder: admission.NewDecoder(scheme)}}
	mux := http.NewServeMux()
	mux.Handle("/mutate", webhook)
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "injector-go:", err)
		os.Exit(1)
	}
	fmt.Printf("injector-go listening webhook=%s\n", listener.Addr())
	server := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	if err := server.ServeTLS(listener, "", ""); err != nil {
		fmt.Fprintln(os.Stderr, "injector-go:", err)
		os.Exit(1)
	}
}
