// Command bench-clientgo is client-go's side of the side-by-side benchmark (tests/bench): a
// shared informer factory syncs one resource from the replay server; it prints one JSON line
// with the time to synced and the live heap it took. --metadata syncs a metadata-only
// informer (k8s.io/client-go/metadata/metadatainformer) instead; --resource servicemonitors
// syncs the custom resource through a dynamic informer (unstructured objects: client-go has
// no typed informer for a CRD without code generated for it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func rss() uint64 {
	data, _ := os.ReadFile("/proc/self/statm")
	f := strings.Fields(string(data))
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

func main() {
	server := flag.String("server", "", "replay server URL")
	resource := flag.String("resource", "pods", "pods | configmaps")
	strip := flag.Bool("strip-managed-fields", false, "drop metadata.managedFields in a transform")
	listers := flag.Bool("listers", false, "after sync, time lister operations (pods)")
	handlers := flag.Int("handlers", 0, "event handlers to register; with --events, time watch events")
	events := flag.Int("events", 0, "after sync, churn this many events as fast as possible (throughput, CPU)")
	paced := flag.Int("paced-events", 0, "then this many events at --rate per second (latency)")
	rate := flag.Int("rate", 1000, "rate of the paced events")
	relist := flag.Bool("relist", false, "after sync, report peak memory of the sync and of a relist forced by a 410")
	pagedList := flag.Bool("paged-list", false, "paged LIST instead of WatchList (client-go's WatchListClient feature off)")
	proto := flag.Bool("protobuf", false, "protobuf instead of JSON")
	metadataOnly := flag.Bool("metadata", false, "a metadata-only informer (PartialObjectMetadata)")
	flag.Parse()
	if *pagedList {
		os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	}
	var peaks *peakSampler
	if *relist {
		peaks = startPeakSampler()
	}

	config := &rest.Config{Host: *server, QPS: -1}
	config.ContentType = "application/json"
	if *proto {
		// client-go's default content type.
		config.ContentType = "application/vnd.kubernetes.protobuf"
	}
	client := kubernetes.NewForConfigOrDie(config)
	factory := informers.NewSharedInformerFactory(client, 0)
	// Started with the typed factory: the metadata-only or dynamic one, when used.
	var other interface{ Start(<-chan struct{}) }
	gvr := schema.GroupVersionResource{Version: "v1", Resource: *resource}
	if *resource == "servicemonitors" {
		gvr.Group = "monitoring.coreos.com"
	}
	var informer cache.SharedIndexInformer
	switch {
	case *metadataOnly:
		f := metadatainformer.NewSharedInformerFactory(metadata.NewForConfigOrDie(config), 0)
		informer, other = f.ForResource(gvr).Informer(), f
	case *resource == "servicemonitors":
		f := dynamicinformer.NewDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(config), 0)
		informer, other = f.ForResource(gvr).Informer(), f
	case *resource == "pods":
		informer = factory.Core().V1().Pods().Informer()
	case *resource == "configmaps":
		informer = factory.Core().V1().ConfigMaps().Informer()
	default:
		fmt.Fprintln(os.Stderr, "unknown resource", *resource)
		os.Exit(2)
	}
	if *strip {
		informer.SetTransform(func(obj any) (any, error) {
			if m, ok := obj.(metav1.Object); ok {
				m.SetManagedFields(nil)
			}
			return obj, nil
		})
	}
	var counter *handlerCounter
	if *handlers > 0 {
		counter = addHandlers(informer, *handlers)
	}
	var relists *atomic.Int64
	if *relist {
		relists = countUpdates(informer)
	}
	before, rssBefore := heap(), rss()
	start := time.Now()
	ctx := context.Background()
	factory.Start(ctx.Done())
	if other != nil {
		other.Start(ctx.Done())
	}
	// cache.WaitForCacheSync polls every 100 ms, which would round client-go's time up by as
	// much; polling HasSynced every millisecond measures when it actually synced.
	for !informer.HasSynced() {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	after, rssAfter := heap(), rss()
	n := len(informer.GetStore().ListKeys())
	out, _ := json.Marshal(map[string]any{
		"client": "client-go", "n": n, "sync_seconds": elapsed.Seconds(),
		"heap_bytes": int64(after) - int64(before), "rss_bytes": int64(rssAfter) - int64(rssBefore),
	})
	fmt.Println(string(out))
	if peaks != nil {
		relistMemory(*server, relists, peaks, n, before, rssBefore)
	}
	if counter != nil && *events > 0 {
		counter.waitSynced()
		eventOps(*server, counter, *handlers, *events, *paced, *rate)
	}
	if *listers && *resource == "pods" {
		listerOps(factory.Core().V1().Pods().Lister(), informer)
	}
	runtime.KeepAlive(informer)
}

// listerOps times the lister operations ours and kube-rs's are compared on.
func listerOps(lister corev1listers.PodLister, informer cache.SharedIndexInformer) {
	all, _ := lister.List(labels.Everything())
	type key struct{ ns, name string }
	keys := make([]key, len(all))
	for i, p := range all {
		keys[i] = key{p.Namespace, p.Name}
	}
	const iters = 1000000
	start := time.Now()
	found := 0
	for i := 0; i < iters; i++ {
		k := keys[(i*7919)%len(keys)]
		if _, err := lister.Pods(k.ns).Get(k.name); err == nil {
			found++
		}
	}
	getNs := float64(time.Since(start).Nanoseconds()) / iters
	if found != iters {
		panic("lister get missed")
	}
	const rounds = 2000
	start = time.Now()
	listed := 0
	for i := 0; i < rounds; i++ {
		l, _ := lister.Pods("ns-007").List(labels.Everything())
		listed += len(l)
	}
	nsList := time.Since(start).Seconds() * 1e6 / rounds
	selector := labels.SelectorFromSet(labels.Set{"app": "app-7"})
	start = time.Now()
	selected := 0
	for i := 0; i < rounds/10; i++ {
		l, _ := lister.List(selector)
		selected += len(l)
	}
	selectorList := time.Since(start).Seconds() * 1e6 / (rounds / 10)
	start = time.Now()
	indexed := 0
	for i := 0; i < rounds; i++ {
		l, _ := informer.GetIndexer().ByIndex(cache.NamespaceIndex, "ns-007")
		indexed += len(l)
	}
	index := time.Since(start).Seconds() * 1e6 / rounds
	out, _ := json.Marshal(map[string]any{"client": "client-go", "get_ns": getNs, "ns_list_us": nsList, "selector_list_us": selectorList, "index_us": index,
		"ns_items": listed / rounds, "selector_items": selected / (rounds / 10), "index_items": indexed / rounds})
	fmt.Println(string(out))
}

// handlerCounter counts the churn events (updates carrying bench/sent-ns) the handlers got and,
// while recording, their latencies from the server's write.
type handlerCounter struct {
	updates       atomic.Int64
	mu            sync.Mutex
	latencies     []int64
	record        atomic.Bool
	registrations []cache.ResourceEventHandlerRegistration
}

func addHandlers(informer cache.SharedIndexInformer, n int) *handlerCounter {
	c := &handlerCounter{}
	for i := 0; i < n; i++ {
		reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) {
				m, ok := obj.(metav1.Object)
				if !ok {
					return
				}
				sent, err := strconv.ParseInt(m.GetAnnotations()["bench/sent-ns"], 10, 64)
				if err != nil {
					return
				}
				if c.record.Load() {
					lat := time.Now().UnixNano() - sent
					c.mu.Lock()
					c.latencies = append(c.latencies, lat)
					c.mu.Unlock()
				}
				c.updates.Add(1)
			},
		})
		if err != nil {
			panic(err)
		}
		c.registrations = append(c.registrations, reg)
	}
	return c
}

func (c *handlerCounter) waitSynced() {
	for _, r := range c.registrations {
		for !r.HasSynced() {
			time.Sleep(time.Millisecond)
		}
	}
}

func (c *handlerCounter) waitFor(n int64) {
	deadline := time.Now().Add(10 * time.Minute)
	for c.updates.Load() < n {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("handlers got %d of %d events", c.updates.Load(), n))
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func churn(server string, events, rate int) {
	resp, err := http.Get(fmt.Sprintf("%s/churn?events=%d&rate=%d", server, events, rate))
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "1 ") {
		panic(fmt.Sprintf("churn: %s %s", resp.Status, body))
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// eventOps times watch events to the handlers: throughput and CPU at full speed, then
// latency from the server's write to the handler at a set rate. Prints one JSON line.
func eventOps(server string, c *handlerCounter, handlers, events, paced, rate int) {
	cpu0, start := cpuSeconds(), time.Now()
	churn(server, events, 0)
	c.waitFor(int64(events * handlers))
	elapsed, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
	result := map[string]any{"client": "client-go", "handlers": handlers, "events": events,
		"events_per_s": float64(events) / elapsed, "cpu_s_per_million": cpu / float64(events) * 1e6}
	if paced > 0 {
		c.updates.Store(0)
		c.record.Store(true)
		churn(server, paced, rate)
		c.waitFor(int64(paced * handlers))
		c.mu.Lock()
		l := append([]int64(nil), c.latencies...)
		c.mu.Unlock()
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		result["p50_us"] = float64(l[len(l)/2]) / 1e3
		result["p99_us"] = float64(l[len(l)*99/100]) / 1e3
		result["paced_rate"] = rate
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}

// peakSampler samples the Go heap in use (live and not yet collected objects) every
// millisecond: Go has no exact peak of the live heap.
type peakSampler struct {
	peak atomic.Uint64
}

func startPeakSampler() *peakSampler {
	p := &peakSampler{}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		for {
			metrics.Read(sample)
			v := sample[0].Value.Uint64()
			for {
				old := p.peak.Load()
				if v <= old || p.peak.CompareAndSwap(old, v) {
					break
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	resetPeakRSS()
	return p
}

func peakRSS() uint64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, "VmHWM:"), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func resetPeakRSS() {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		panic(err)
	}
}

// countUpdates counts update notifications (a relist turns every cached object into one).
func countUpdates(informer cache.SharedIndexInformer) *atomic.Int64 {
	var n atomic.Int64
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) { n.Add(1) }}); err != nil {
		panic(err)
	}
	return &n
}

// relistMemory reports the peak memory of the initial sync and of a relist forced by a 410.
// Heap figures: the sampled heap in use (live plus uncollected), against the live heap after
// a GC once synced.
func relistMemory(server string, updates *atomic.Int64, p *peakSampler, n int, heap0, rss0 uint64) {
	result := map[string]any{"client": "client-go",
		"initial_peak_heap": int64(p.peak.Load()) - int64(heap0), "initial_peak_rss": int64(peakRSS()) - int64(rss0)}
	result["steady_heap"] = int64(heap()) - int64(heap0)
	result["steady_rss"] = int64(rss()) - int64(rss0)
	p.peak.Store(0)
	resetPeakRSS()
	start := time.Now()
	resp, err := http.Get(server + "/expire")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "1 ") {
		panic("expire: " + string(body))
	}
	deadline := time.Now().Add(10 * time.Minute)
	for updates.Load() < int64(n) {
		if time.Now().After(deadline) {
			panic("relist did not finish")
		}
		time.Sleep(time.Millisecond)
	}
	result["relist_seconds"] = time.Since(start).Seconds()
	result["relist_peak_heap"] = int64(p.peak.Load()) - int64(heap0)
	result["relist_peak_rss"] = int64(peakRSS()) - int64(rss0)
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}
