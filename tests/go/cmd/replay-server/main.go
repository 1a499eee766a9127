// Command replay-server serves pre-encoded Kubernetes LIST pages, WatchList streams and watch
// streams on loopback, so informer clients can be measured side by side on the same bytes
// without the server being the bottleneck. It is part of the benchmark harness
// (tests/bench); it is not an API server: it serves one resource's collection and nothing else.
//
//	replay-server --workload pods-shared --n 10000 --addr 127.0.0.1:0 [--list-delay 5ms] [--warm-events E]
//
// Before it listens it encodes what clients will ask for (the list pages of 500 objects in
// JSON and, for built-in kinds, protobuf; the protobuf WatchList stream; the churn events of
// the first E objects in JSON, as metadata only and in protobuf), so that no client's
// measurement carries the server's first encoding of them. It prints "listening
// http://ADDR" and the JSON size of the objects, then serves:
//
//	GET /api/v1/{pods|configmaps}?limit=L&continue=C        paged list (resourceVersion of the set)
//	    (/apis/monitoring.coreos.com/v1/servicemonitors for the servicemonitors workload)
//	GET /api/v1/{pods|configmaps}?watch=1&sendInitialEvents=true
//	                                                        every object as ADDED, then the
//	                                                        initial-events-end BOOKMARK
//	GET /api/v1/{pods|configmaps}?watch=1&resourceVersion=R a BOOKMARK, then silence until timeoutSeconds
//	Accept: application/vnd.kubernetes.protobuf            the same paged lists, WatchList
//	                                                        streams and watches (churn, expiry)
//	                                                        in protobuf (built-in kinds)
//	Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1 (or as=PartialObjectMetadata)
//	                                                        the same lists and watches (churn,
//	                                                        expiry), metadata only; wins over
//	                                                        protobuf in the same Accept header
//	GET /churn?events=E&rate=R                              on every open watch stream: E MODIFIED
//	                                                        events (objects in a scattered order,
//	                                                        resourceVersions 2000000, 2000001, …),
//	                                                        R per second (0: as fast as possible)
//	GET /expire                                             every open watch stream ends with a
//	                                                        410 Expired ERROR event (forces a relist)
//
// Each churn event's object carries the annotation bench/sent-ns: the wall clock (Unix
// nanoseconds) when the server wrote it, from which clients measure latency to their handlers.
// The events' bytes are patched in place from a per-object template, so the server writes
// far faster than any client decodes.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const listRV = "1000000"

type server struct {
	listDelay time.Duration // before each list page is written
	path      string        // of the collection
	resource  string
	full      *view
	meta      *view    // the same objects as PartialObjectMetadata
	objects   [][]byte // full.objects
	mu        sync.Mutex

	// Protobuf (client-go's default content type) for built-in kinds: paged lists, WatchList
	// streams and watches, each event a length-prefixed metav1.WatchEvent.
	newList     func(items [][]byte) runtime.Object // a typed list of the objects (JSON in)
	protoPages  map[int][][]byte
	protoSerial runtime.Serializer
	protoEvents [][]byte // the WatchList stream in protobuf, one frame per event (built on first use)

	// Churn: templates of MODIFIED events (built on first use; JSON lines of the full
	// objects and of their metadata, protobuf frames) and the open watch streams with the
	// encoding each reads.
	marshalChurn   func(i int) []byte // the object i with placeholder resourceVersion and sent-ns
	templates      map[int]*eventTemplate
	metaTemplates  map[int]*eventTemplate
	protoTemplates map[int]*eventTemplate
	watchers       map[chan churn]encoding
	nextRV         int
}

// encoding is what a watch stream is written in: the full objects in JSON or protobuf, or
// their metadata (PartialObjectMetadata, JSON only).
type encoding struct {
	proto, meta bool
}

// view is one representation of the served objects (full, or metadata only) and its paged
// lists by limit; s.mu guards pages.
type view struct {
	objects          [][]byte // JSON of each object, in key order
	kind, apiVersion string   // of each object (and of bookmarks); the list kind is kind+"List"
	pages            map[int][][]byte
}

// metadataView is v's objects as PartialObjectMetadata: their metadata, nothing else.
func metadataView(v *view) *view {
	m := &view{kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", pages: map[int][][]byte{}}
	for _, o := range v.objects {
		m.objects = append(m.objects, metadataOnly(o))
	}
	return m
}

// metadataOnly is the JSON object o as PartialObjectMetadata: its metadata as written in o.
func metadataOnly(o []byte) []byte {
	var obj struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(o, &obj); err != nil {
		panic(err)
	}
	return []byte(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":` + string(obj.Metadata) + `}`)
}

// churn is one /churn request as handed to a watch stream.
type churn struct {
	events, rate, firstRV int
	expire                bool // instead: end the stream with 410 Expired
}

// eventTemplate is a whole MODIFIED event for one object (a JSON line, or a protobuf frame
// with its length prefix), with the offsets of its resourceVersion digits and its
// bench/sent-ns digits (both fixed-length strings, so patching them keeps every length).
type eventTemplate struct {
	line         []byte
	rvAt, sentAt int
}

const (
	rvPlaceholder   = "0000000"
	sentPlaceholder = "0000000000000000000"
	sentAnnotation  = "bench/sent-ns"
)

func main() {
	workload := flag.String("workload", "configmaps", "configmaps | pods-shared | pods-unique | servicemonitors")
	n := flag.Int("n", 10000, "number of objects")
	templates := flag.Int("templates", 200, "pod templates for pods-shared")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	listDelay := flag.Duration("list-delay", 0, "wait before answering each list page: the time a real API server takes to serve one (0: none)")
	warmEvents := flag.Int("warm-events", 0, "encode the churn events of this many objects before listening (a churn of E events touches min(E, n) objects)")
	flag.Parse()

	s := &server{full: &view{apiVersion: "v1", pages: map[int][][]byte{}}, protoPages: map[int][][]byte{}, templates: map[int]*eventTemplate{}, metaTemplates: map[int]*eventTemplate{}, protoTemplates: map[int]*eventTemplate{}, watchers: map[chan churn]encoding{}, nextRV: 2000000, listDelay: *listDelay}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	s.protoSerial = protobuf.NewSerializer(scheme, scheme)
	switch *workload {
	case "configmaps":
		s.resource, s.full.kind = "configmaps", "ConfigMap"
		for i := 0; i < *n; i++ {
			s.full.objects = append(s.full.objects, must(json.Marshal(configMap(i))))
		}
		s.newList = func(items [][]byte) runtime.Object {
			return &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}, Items: decodeAll[corev1.ConfigMap](items)}
		}
		s.marshalChurn = func(i int) []byte {
			o := configMap(i)
			o.ResourceVersion = rvPlaceholder
			o.Annotations = map[string]string{sentAnnotation: sentPlaceholder}
			return must(json.Marshal(o))
		}
	case "pods-shared", "pods-unique":
		s.resource, s.full.kind = "pods", "Pod"
		// The template of pod i: shared by every templates-th pod, or its own.
		templateOf := func(i int) int {
			if *workload == "pods-unique" {
				return i
			}
			return i % *templates
		}
		for i := 0; i < *n; i++ {
			s.full.objects = append(s.full.objects, must(json.Marshal(pod(i, templateOf(i)))))
		}
		s.newList = func(items [][]byte) runtime.Object {
			return &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: decodeAll[corev1.Pod](items)}
		}
		s.marshalChurn = func(i int) []byte {
			o := pod(i, templateOf(i))
			o.ResourceVersion = rvPlaceholder
			o.Annotations[sentAnnotation] = sentPlaceholder
			return must(json.Marshal(o))
		}
	case "servicemonitors":
		// A custom resource (prometheus-operator's ServiceMonitor, the CRD in
		// generated-sample/schemas/crds), JSON only; no two alike.
		s.path = "/apis/monitoring.coreos.com/v1/servicemonitors"
		s.resource, s.full.kind, s.full.apiVersion = "servicemonitors", "ServiceMonitor", "monitoring.coreos.com/v1"
		for i := 0; i < *n; i++ {
			s.full.objects = append(s.full.objects, must(json.Marshal(serviceMonitor(i))))
		}
		s.marshalChurn = func(i int) []byte {
			o := serviceMonitor(i)
			meta := o["metadata"].(map[string]any)
			meta["resourceVersion"] = rvPlaceholder
			meta["annotations"] = map[string]any{sentAnnotation: sentPlaceholder}
			return must(json.Marshal(o))
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown workload %q\n", *workload)
		os.Exit(2)
	}
	if s.path == "" {
		s.path = "/api/v1/" + s.resource
	}
	s.objects = s.full.objects
	s.meta = metadataView(s.full)
	total := 0
	for _, o := range s.objects {
		total += len(o)
	}
	s.warm(*warmEvents)
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		panic(err)
	}
	fmt.Printf("listening http://%s\n", l.Addr())
	fmt.Printf("objects %d bytes %d\n", len(s.objects), total)
	os.Stdout.Sync()
	http.Serve(l, s)
}

// warmPageLimit is the page size every measured client lists with (client-go's, kube-rs's
// and informer-gen's default).
const warmPageLimit = 500

// warm encodes, ahead of any request, the list pages of warmPageLimit objects (JSON, full
// and metadata-only; protobuf), the protobuf WatchList stream and the churn templates of the
// first events objects in JSON and protobuf. What is not warmed is still built on first use.
func (s *server) warm(events int) {
	s.pagesFor(s.full, warmPageLimit)
	s.pagesFor(s.meta, warmPageLimit)
	if s.newList != nil {
		s.protoPagesFor(warmPageLimit)
		s.protoWatchList()
	}
	for i := 0; i < events && i < len(s.objects); i++ {
		s.template(s.churnObject(i), encoding{})
		s.template(s.churnObject(i), encoding{meta: true})
		if s.newList != nil {
			s.template(s.churnObject(i), encoding{proto: true})
		}
	}
}

// decodeAll decodes each JSON document into a T.
func decodeAll[T any](docs [][]byte) []T {
	out := make([]T, len(docs))
	for i, b := range docs {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			panic(err)
		}
	}
	return out
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/churn" {
		s.startChurn(w, r)
		return
	}
	if r.URL.Path == "/expire" {
		s.mu.Lock()
		open := s.broadcast(churn{expire: true})
		s.mu.Unlock()
		fmt.Fprintf(w, "%d watch streams\n", open)
		return
	}
	if r.URL.Path != s.path {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	v := s.full
	if strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata") {
		v = s.meta
	}
	proto := v == s.full && s.newList != nil && strings.Contains(r.Header.Get("Accept"), protobufType)
	if proto {
		w.Header().Set("Content-Type", protobufType)
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	if q.Get("watch") == "1" || q.Get("watch") == "true" {
		s.watch(w, r, v, proto)
		return
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	page := 0
	if c := q.Get("continue"); c != "" {
		page, _ = strconv.Atoi(c)
	}
	var pages [][]byte
	if proto {
		pages = s.protoPagesFor(limit)
	} else {
		pages = s.pagesFor(v, limit)
	}
	if page >= len(pages) {
		http.Error(w, "bad continue", http.StatusBadRequest)
		return
	}
	if s.listDelay > 0 {
		time.Sleep(s.listDelay)
	}
	w.Write(pages[page])
}

func (s *server) pagesFor(v *view, limit int) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit <= 0 || limit > len(v.objects) {
		limit = len(v.objects)
	}
	if p, ok := v.pages[limit]; ok {
		return p
	}
	var pages [][]byte
	for start := 0; start < len(v.objects) || start == 0; start += limit {
		end := start + limit
		if end > len(v.objects) {
			end = len(v.objects)
		}
		var b bytes.Buffer
		cont := ""
		if end < len(v.objects) {
			cont = strconv.Itoa(len(pages) + 1)
		}
		fmt.Fprintf(&b, `{"kind":"%sList","apiVersion":"%s","metadata":{"resourceVersion":"%s","continue":"%s"},"items":[`, v.kind, v.apiVersion, listRV, cont)
		for i, o := range v.objects[start:end] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(o)
		}
		b.WriteString("]}")
		pages = append(pages, b.Bytes())
		if end == len(v.objects) {
			break
		}
	}
	v.pages[limit] = pages
	return pages
}

const protobufType = "application/vnd.kubernetes.protobuf"

// protoPagesFor is pagesFor in protobuf: the same objects, the same pages.
func (s *server) protoPagesFor(limit int) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit <= 0 || limit > len(s.objects) {
		limit = len(s.objects)
	}
	if p, ok := s.protoPages[limit]; ok {
		return p
	}
	var pages [][]byte
	for start := 0; start < len(s.objects); start += limit {
		end := min(start+limit, len(s.objects))
		list := s.newList(s.objects[start:end])
		lm, err := meta.ListAccessor(list)
		if err != nil {
			panic(err)
		}
		lm.SetResourceVersion(listRV)
		if end < len(s.objects) {
			lm.SetContinue(strconv.Itoa(len(pages) + 1))
		}
		var b bytes.Buffer
		if err := s.protoSerial.Encode(list, &b); err != nil {
			panic(err)
		}
		pages = append(pages, b.Bytes())
	}
	s.protoPages[limit] = pages
	return pages
}

// protoWatchList is the WatchList stream in protobuf, one frame per event (protoFrame):
// each object ADDED, then the initial-events-end BOOKMARK.
func (s *server) protoWatchList() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.protoEvents != nil {
		return s.protoEvents
	}
	var events [][]byte
	for start := 0; start < len(s.objects); start += 1000 {
		items, err := meta.ExtractList(s.newList(s.objects[start:min(start+1000, len(s.objects))]))
		if err != nil {
			panic(err)
		}
		for _, o := range items {
			events = append(events, s.protoFrame("ADDED", o))
		}
	}
	s.protoEvents = append(events, s.protoBookmark(true))
	return s.protoEvents
}

// protoFrame is one protobuf watch event as the API server writes it: a 4-byte big-endian
// length, then a metav1.WatchEvent whose object is obj encoded in protobuf.
func (s *server) protoFrame(typ string, obj runtime.Object) []byte {
	var b bytes.Buffer
	if err := s.protoSerial.Encode(obj, &b); err != nil {
		panic(err)
	}
	event := must((&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: b.Bytes()}}).Marshal())
	out := binary.BigEndian.AppendUint32(nil, uint32(len(event)))
	return append(out, event...)
}

// protoBookmark is bookmark in protobuf.
func (s *server) protoBookmark(initialEnd bool) []byte {
	typeMeta := metav1.TypeMeta{Kind: s.full.kind, APIVersion: s.full.apiVersion}
	bookmarkMeta := metav1.ObjectMeta{ResourceVersion: listRV}
	if initialEnd {
		bookmarkMeta.Annotations = map[string]string{"k8s.io/initial-events-end": "true"}
	}
	if s.full.kind == "Pod" {
		return s.protoFrame("BOOKMARK", &corev1.Pod{TypeMeta: typeMeta, ObjectMeta: bookmarkMeta})
	}
	return s.protoFrame("BOOKMARK", &corev1.ConfigMap{TypeMeta: typeMeta, ObjectMeta: bookmarkMeta})
}

// expired is the ERROR event that ends a watch with 410 Expired, in the stream's format.
func (s *server) expired(proto bool) []byte {
	if !proto {
		return []byte(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}}` + "\n")
	}
	return s.protoFrame("ERROR", &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: "too old resource version", Reason: metav1.StatusReasonExpired, Code: http.StatusGone})
}

func (v *view) bookmark(initialEnd bool) []byte {
	ann := ""
	if initialEnd {
		ann = `,"annotations":{"k8s.io/initial-events-end":"true"}`
	}
	return []byte(fmt.Sprintf(`{"type":"BOOKMARK","object":{"kind":"%s","apiVersion":"%s","metadata":{"resourceVersion":"%s"%s}}}`+"\n", v.kind, v.apiVersion, listRV, ann))
}

func (s *server) watch(w http.ResponseWriter, r *http.Request, v *view, proto bool) {
	q := r.URL.Query()
	flusher := w.(http.Flusher)
	if proto {
		w.Header().Set("Content-Type", protobufType+";stream=watch")
	}
	w.WriteHeader(http.StatusOK)
	if proto && q.Get("sendInitialEvents") == "true" {
		// As the API server writes a protobuf watch: each event's length, then its bytes,
		// two writes through the connection's 2 KB buffer (so an event larger than that
		// goes out as a chunk of its own).
		for _, frame := range s.protoWatchList() {
			w.Write(frame[:4])
			w.Write(frame[4:])
		}
	} else if proto {
		w.Write(s.protoBookmark(false))
	} else if q.Get("sendInitialEvents") == "true" {
		for _, o := range v.objects {
			w.Write([]byte(`{"type":"ADDED","object":`))
			w.Write(o)
			w.Write([]byte("}\n"))
		}
		w.Write(v.bookmark(true))
	} else {
		w.Write(v.bookmark(false))
	}
	flusher.Flush()
	timeout := 300 * time.Second
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	churns := make(chan churn, 4)
	enc := encoding{proto: proto, meta: v == s.meta}
	s.mu.Lock()
	s.watchers[churns] = enc
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, churns)
		s.mu.Unlock()
	}()
	deadline := time.After(timeout)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-deadline:
			return
		case c := <-churns:
			if c.expire {
				w.Write(s.expired(proto))
				flusher.Flush()
				return
			}
			if !s.writeChurn(w, flusher, r, c, enc) {
				return
			}
		}
	}
}

// startChurn hands a churn request to every open watch stream.
func (s *server) startChurn(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	events, _ := strconv.Atoi(q.Get("events"))
	rate, _ := strconv.Atoi(q.Get("rate"))
	if events <= 0 || events > 7000000 {
		http.Error(w, "events must be in 1..7000000", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	formats := map[encoding]bool{}
	for _, e := range s.watchers {
		formats[e] = true
	}
	s.mu.Unlock()
	for e := range formats {
		for i := 0; i < events && i < len(s.objects); i++ {
			s.template(s.churnObject(i), e)
		}
	}
	s.mu.Lock()
	c := churn{events: events, rate: rate, firstRV: s.nextRV}
	s.nextRV += events
	if s.nextRV > 9999999 {
		s.mu.Unlock()
		http.Error(w, "resourceVersions exhausted", http.StatusBadRequest)
		return
	}
	open := s.broadcast(c)
	s.mu.Unlock()
	fmt.Fprintf(w, "%d watch streams\n", open)
}

// broadcast hands c to every open watch stream and returns how many there are; s.mu is held.
func (s *server) broadcast(c churn) int {
	for ch := range s.watchers {
		ch <- c
	}
	return len(s.watchers)
}

// churnObject is the object the i-th event of a churn modifies: all objects in a scattered
// order, so consecutive events touch unrelated keys.
func (s *server) churnObject(i int) int {
	return (i * 7919) % len(s.objects)
}

func (s *server) template(obj int, e encoding) *eventTemplate {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.proto {
		return s.protoTemplate(obj)
	}
	templates := s.templates
	if e.meta {
		templates = s.metaTemplates
	}
	if t, ok := templates[obj]; ok {
		return t
	}
	object := s.marshalChurn(obj)
	if e.meta {
		object = metadataOnly(object)
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"MODIFIED","object":`)
	b.Write(object)
	b.WriteString("}\n")
	line := b.Bytes()
	t := &eventTemplate{
		line:   line,
		rvAt:   bytes.Index(line, []byte(`"resourceVersion":"`+rvPlaceholder+`"`)) + len(`"resourceVersion":"`),
		sentAt: bytes.Index(line, []byte(`"`+sentAnnotation+`":"`+sentPlaceholder+`"`)) + len(`"`+sentAnnotation+`":"`),
	}
	if t.rvAt < len(`"resourceVersion":"`) || t.sentAt < len(`"`+sentAnnotation+`":"`) {
		panic("churn template without placeholders")
	}
	templates[obj] = t
	return t
}

// protoTemplate is template in protobuf: the object's JSON with its placeholders made
// distinct (a protobuf object has other runs of zeros, in its container IDs), decoded into
// its Go type and framed; s.mu is held.
func (s *server) protoTemplate(obj int) *eventTemplate {
	if t, ok := s.protoTemplates[obj]; ok {
		return t
	}
	rvMark, sentMark := strings.Repeat("R", len(rvPlaceholder)), strings.Repeat("S", len(sentPlaceholder))
	doc := bytes.Replace(s.marshalChurn(obj), []byte(`"resourceVersion":"`+rvPlaceholder+`"`), []byte(`"resourceVersion":"`+rvMark+`"`), 1)
	doc = bytes.Replace(doc, []byte(`"`+sentAnnotation+`":"`+sentPlaceholder+`"`), []byte(`"`+sentAnnotation+`":"`+sentMark+`"`), 1)
	items, err := meta.ExtractList(s.newList([][]byte{doc}))
	if err != nil {
		panic(err)
	}
	frame := s.protoFrame("MODIFIED", items[0])
	t := &eventTemplate{line: frame, rvAt: bytes.Index(frame, []byte(rvMark)), sentAt: bytes.Index(frame, []byte(sentMark))}
	if t.rvAt < 0 || t.sentAt < 0 || bytes.Count(frame, []byte(rvMark)) != 1 || bytes.Count(frame, []byte(sentMark)) != 1 {
		panic("protobuf churn template without its placeholders once each")
	}
	s.protoTemplates[obj] = t
	return t
}

// writeChurn writes one churn's events, paced when it has a rate; false when the client went
// away.
func (s *server) writeChurn(w http.ResponseWriter, flusher http.Flusher, r *http.Request, c churn, e encoding) bool {
	start := time.Now()
	buf := make([]byte, 0, 64<<10)
	for i := 0; i < c.events; i++ {
		t := s.template(s.churnObject(i), e)
		if c.rate > 0 {
			if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(c.rate))); wait > 0 {
				time.Sleep(wait)
			}
		}
		at := len(buf)
		buf = append(buf, t.line...)
		copy(buf[at+t.rvAt:], strconv.Itoa(c.firstRV+i))
		copy(buf[at+t.sentAt:], fmt.Sprintf("%019d", time.Now().UnixNano()))
		if c.rate > 0 || len(buf) >= 64<<10 || i == c.events-1 {
			if _, err := w.Write(buf); err != nil {
				return false
			}
			flusher.Flush()
			buf = buf[:0]
		}
		if r.Context().Err() != nil {
			return false
		}
	}
	return true
}

func configMap(i int) *corev1.ConfigMap {
	ns := fmt.Sprintf("ns-%03d", i%100)
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("config-%06d", i), Namespace: ns,
			UID:               types.UID(fmt.Sprintf("6f1c1b1e-0000-4000-8000-%012d", i)),
			ResourceVersion:   strconv.Itoa(1000 + i),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)),
			Labels:            map[string]string{"app": fmt.Sprintf("app-%d", i%50), "team": "platform"},
		},
		Data: map[string]string{
			"config.yaml": fmt.Sprintf("server:\n  port: %d\n  host: 0.0.0.0\nlogging:\n  level: info\n  format: json\nfeatures:\n  a: true\n  b: false\n", 8000+i%1000),
			"settings":    strings.Repeat(fmt.Sprintf("key%d=value%d\n", i%10, i%7), 40),
		},
	}
}

func pod(i, template int) *corev1.Pod {
	ns := fmt.Sprintf("ns-%03d", template%100)
	app := fmt.Sprintf("app-%d", template)
	hash := fmt.Sprintf("%010x", template*7919)[:10]
	name := fmt.Sprintf("%s-%s-%05d", app, hash, i)
	created := metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	trueV := true
	var grace int64 = 30
	var tolSeconds int64 = 300
	var expiry int64 = 3607
	fieldsController := `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"` + fmt.Sprintf("%d", template) + `\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"POD_NAME\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}}},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:readinessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/etc/config\"}":{".":{},"f:mountPath":{},"f:name":{}}}},"k:{\"name\":\"sidecar\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{".":{},"f:runAsNonRoot":{}},"f:terminationGracePeriodSeconds":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:defaultMode":{},"f:name":{}},"f:name":{}}}}}`
	fieldsKubelet := `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.1.5\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`
	image := "registry.example.com/team/" + app + ":v1.4.2"
	logLevel := "info"
	if template == i { // unique workload: nothing shared between pods
		image = fmt.Sprintf("registry.example.com/team/%s:v1.%d", app, i)
		logLevel = fmt.Sprintf("info-%d", i)
	}
	node := fmt.Sprintf("node-%03d", i%300)
	podIP := fmt.Sprintf("10.%d.%d.%d", 244+i/65536%10, i/256%256, i%256)
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: created}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: fmt.Sprintf("%s-%s-", app, hash), Namespace: ns,
			UID:               types.UID(fmt.Sprintf("9a7d0c3e-0000-4000-8000-%012d", i)),
			ResourceVersion:   strconv.Itoa(1000 + i),
			CreationTimestamp: created,
			Labels:            map[string]string{"app": app, "pod-template-hash": hash},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-10-30T08:00:00Z", "prometheus.io/scrape": "true",
				"prometheus.io/port": "8080", "checksum/config": fmt.Sprintf("%064x", template*31337)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + hash,
				UID: types.UID(fmt.Sprintf("%d", template)), Controller: &trueV, BlockOwnerDeletion: &trueV}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: "Update", APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fieldsController)}},
				{Manager: "kubelet", Operation: "Update", APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fieldsKubelet)}, Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}},
				{Name: "kube-api-access-" + hash[:5], VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiry, Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}}}},
			},
			Containers: []corev1.Container{
				{
					Name: "app", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
					Env:   append([]corev1.EnvVar{{Name: "LOG_LEVEL", Value: logLevel}, {Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}, extraEnv(app)...),
					Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					},
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/config"}, {Name: "kube-api-access-" + hash[:5], ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
					LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
						TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
						TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3},
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				},
				{
					Name: "sidecar", Image: "registry.example.com/infra/proxy:2.8.1", ImagePullPolicy: corev1.PullIfNotPresent,
					Resources:              corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				},
			},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace, DNSPolicy: corev1.DNSClusterFirst,
			ServiceAccountName: "default", DeprecatedServiceAccount: "default", NodeName: node,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &trueV}, SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolSeconds},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolSeconds},
			},
			EnableServiceLinks: &trueV, PreemptionPolicy: ptr(corev1.PreemptLowerPriority), Priority: ptr(int32(0)),
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{cond("PodReadyToStartContainers"), cond(corev1.PodInitialized), cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled)},
			HostIP:     fmt.Sprintf("192.168.%d.%d", i%300/256, i%300%256), HostIPs: []corev1.HostIP{{IP: fmt.Sprintf("192.168.%d.%d", i%300/256, i%300%256)}},
			PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}}, StartTime: &created, QOSClass: corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Ready: true, RestartCount: 0, Image: image, ImageID: "registry.example.com/team/" + app + "@sha256:" + fmt.Sprintf("%064x", template),
					ContainerID: fmt.Sprintf("containerd://%064x", i*2), Started: &trueV, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}},
				{Name: "sidecar", Ready: true, RestartCount: 0, Image: "registry.example.com/infra/proxy:2.8.1", ImageID: "registry.example.com/infra/proxy@sha256:" + fmt.Sprintf("%064x", 42),
					ContainerID: fmt.Sprintf("containerd://%064x", i*2+1), Started: &trueV, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// extraEnv is the configuration a typical service carries in its environment.
func extraEnv(app string) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, k := range []string{"DATABASE_URL", "CACHE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "FEATURE_FLAGS", "REGION", "UPSTREAM_TIMEOUT", "MAX_CONNECTIONS", "SERVICE_NAME"} {
		env = append(env, corev1.EnvVar{Name: k, Value: strings.ToLower(k) + "://" + app + ".svc.cluster.local:5432/" + app})
	}
	env = append(env, corev1.EnvVar{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-secrets"}, Key: "token"}}})
	return env
}

// serviceMonitor is a ServiceMonitor as kube-prometheus-style charts write them (≈10 KB of
// JSON): five endpoints with TLS, authorization and relabelings, each object its own.
func serviceMonitor(i int) map[string]any {
	ns := fmt.Sprintf("ns-%03d", i%100)
	app := fmt.Sprintf("svc-%05d", i)
	created := "2026-11-01T12:00:00Z"
	relabel := func(source, target, regex, replacement, action string) map[string]any {
		r := map[string]any{"sourceLabels": []string{source}, "separator": ";", "regex": regex, "action": action}
		if target != "" {
			r["targetLabel"], r["replacement"] = target, replacement
		}
		return r
	}
	var endpoints []any
	for e, port := range []string{"http-metrics", "https-metrics", "grpc-metrics", "probes", "exporter"} {
		endpoints = append(endpoints, map[string]any{
			"port": port, "path": "/metrics", "scheme": "https", "interval": "30s", "scrapeTimeout": "10s",
			"honorLabels": e%2 == 0, "honorTimestamps": true, "followRedirects": true, "enableHttp2": true,
			"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": app + "-scrape-token", "key": "token"}},
			"tlsConfig": map[string]any{
				"ca":         map[string]any{"configMap": map[string]any{"name": app + "-ca", "key": "ca.crt"}},
				"serverName": fmt.Sprintf("%s.%s.svc", app, ns), "insecureSkipVerify": false,
			},
			"params": map[string]any{"collect[]": []string{"cpu", "memory", fmt.Sprintf("endpoint-%d", e)}},
			"relabelings": []any{
				relabel("__meta_kubernetes_pod_node_name", "node", "(.*)", "$1", "replace"),
				relabel("__meta_kubernetes_namespace", "namespace", "(.*)", "$1", "replace"),
				relabel("__meta_kubernetes_pod_name", "pod", "(.*)", "$1", "replace"),
				relabel("__meta_kubernetes_service_name", "service", "(.*)", "$1", "replace"),
				relabel("__meta_kubernetes_pod_container_name", "container", "(.*)", "$1", "replace"),
				relabel("__metrics_path__", "metrics_path", "(.*)", "$1", "replace"),
			},
			"metricRelabelings": []any{
				relabel("__name__", "", "apiserver_request_duration_seconds_bucket;(0.15|0.2|0.3|0.35|0.4|0.45|0.6|0.7|0.8|0.9|1.25|1.5|1.75|2|3|3.5|4|4.5|6|7|8|9|15|25|40|50)", "", "drop"),
				relabel("__name__", "", "(go_gc_.*|go_memstats_.*|process_.*)", "", "drop"),
				relabel("__name__", "", fmt.Sprintf("%s_(requests|errors|latency)_.*", strings.ReplaceAll(app, "-", "_")), "", "keep"),
			},
		})
	}
	return map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
		"metadata": map[string]any{
			"name": app, "namespace": ns, "uid": fmt.Sprintf("4b2e9d1a-0000-4000-8000-%012d", i),
			"resourceVersion": strconv.Itoa(1000 + i), "generation": 1, "creationTimestamp": created,
			"labels": map[string]any{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "kube-prometheus",
				"app.kubernetes.io/managed-by": "Helm", "release": "prometheus", "team": fmt.Sprintf("team-%d", i%20)},
			"annotations": map[string]any{"meta.helm.sh/release-name": "prometheus", "meta.helm.sh/release-namespace": ns},
			"managedFields": []any{map[string]any{"manager": "helm", "operation": "Update", "apiVersion": "monitoring.coreos.com/v1",
				"time": created, "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{".": map[string]any{}, "f:meta.helm.sh/release-name": map[string]any{}, "f:meta.helm.sh/release-namespace": map[string]any{}},
					"f:labels": map[string]any{".": map[string]any{}, "f:app.kubernetes.io/managed-by": map[string]any{}, "f:app.kubernetes.io/name": map[string]any{}, "f:app.kubernetes.io/part-of": map[string]any{}, "f:release": map[string]any{}, "f:team": map[string]any{}}},
					"f:spec": map[string]any{".": map[string]any{}, "f:endpoints": map[string]any{}, "f:jobLabel": map[string]any{}, "f:namespaceSelector": map[string]any{".": map[string]any{}, "f:matchNames": map[string]any{}}, "f:selector": map[string]any{}}}}},
		},
		"spec": map[string]any{
			"jobLabel":          "app.kubernetes.io/name",
			"namespaceSelector": map[string]any{"matchNames": []string{ns}},
			"selector": map[string]any{
				"matchLabels":      map[string]any{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "kube-prometheus"},
				"matchExpressions": []any{map[string]any{"key": "app.kubernetes.io/component", "operator": "In", "values": []string{"server", "worker"}}},
			},
			"targetLabels":    []string{"app.kubernetes.io/name", "team"},
			"podTargetLabels": []string{"app.kubernetes.io/version"},
			"sampleLimit":     50000,
			"endpoints":       endpoints,
		},
	}
}
