// Command proto-fixtures writes the protobuf fixtures of the runtime's protobuf decoder
// tests: built-in objects encoded by the Kubernetes Go libraries themselves, beside their
// JSON, so a test can check that decoding either gives the same object.
//
//	proto-fixtures tests/fixtures/proto
//
// It reads *.input.json in that directory (one object or an array), decodes each object
// into its Go type and writes:
//
//	objects.json    [{"apiVersion", "kind", "json": <the Go type's JSON>, "protobuf": <base64>}]
//	                (protobuf as the API server sends one object: "k8s\0" + runtime.Unknown)
//	pod-list.pb     the Pods as a PodList (resourceVersion "123", continue "next-page",
//	                remainingItemCount 5), as a LIST response body
//	pod-watch.pb    a protobuf watch stream: ADDED and MODIFIED of the first Pod, a BOOKMARK,
//	                then an ERROR with a 410 Status, each a length-prefixed metav1.WatchEvent
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	dir := os.Args[1]
	inputs, err := filepath.Glob(filepath.Join(dir, "*.input.json"))
	must(err)
	sort.Strings(inputs)
	decoder := scheme.Codecs.UniversalDeserializer()
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	type entry struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		JSON       json.RawMessage `json:"json"`
		Protobuf   string          `json:"protobuf"`
	}
	var entries []entry
	var pods []corev1.Pod
	for _, input := range inputs {
		data, err := os.ReadFile(input)
		must(err)
		var raws []json.RawMessage
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) {
			must(json.Unmarshal(data, &raws))
		} else {
			raws = []json.RawMessage{data}
		}
		for _, raw := range raws {
			obj, gvk, err := decoder.Decode(raw, nil, nil)
			must(err)
			var buf bytes.Buffer
			must(pb.Encode(obj, &buf))
			js, err := json.Marshal(obj)
			must(err)
			entries = append(entries, entry{gvk.GroupVersion().String(), gvk.Kind, js, base64.StdEncoding.EncodeToString(buf.Bytes())})
			if pod, ok := obj.(*corev1.Pod); ok {
				pods = append(pods, *pod)
			}
		}
	}
	out, err := json.MarshalIndent(entries, "", " ")
	must(err)
	must(os.WriteFile(filepath.Join(dir, "objects.json"), append(out, '\n'), 0o644))

	remaining := int64(5)
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "123", Continue: "next-page", RemainingItemCount: &remaining}, Items: pods}
	var buf bytes.Buffer
	must(pb.Encode(list, &buf))
	must(os.WriteFile(filepath.Join(dir, "pod-list.pb"), buf.Bytes(), 0o644))

	// A watch stream as the API server writes one: each event's object through the
	// protobuf serializer, the event itself through the stream serializer and its framer.
	var info runtime.SerializerInfo
	for _, i := range scheme.Codecs.SupportedMediaTypes() {
		if i.MediaType == runtime.ContentTypeProtobuf {
			info = i
		}
	}
	var stream bytes.Buffer
	frames := info.StreamSerializer.Framer.NewFrameWriter(&stream)
	bookmark := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "200", Annotations: map[string]string{"k8s.io/initial-events-end": "true"}}}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Message: "too old resource version: 1 (200)", Reason: metav1.StatusReasonExpired, Code: 410}
	modified := pods[0].DeepCopy()
	modified.ResourceVersion = "201"
	for _, ev := range []struct {
		typ string
		obj runtime.Object
	}{{"ADDED", &pods[0]}, {"MODIFIED", modified}, {"BOOKMARK", bookmark}, {"ERROR", gone}} {
		var obj bytes.Buffer
		must(pb.Encode(ev.obj, &obj))
		var event bytes.Buffer
		must(info.StreamSerializer.Serializer.Encode(&metav1.WatchEvent{Type: ev.typ, Object: runtime.RawExtension{Raw: obj.Bytes()}}, &event))
		_, err := frames.Write(event.Bytes())
		must(err)
	}
	must(os.WriteFile(filepath.Join(dir, "pod-watch.pb"), stream.Bytes(), 0o644))
}
