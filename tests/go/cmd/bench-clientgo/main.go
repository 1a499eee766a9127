// Command bench-clientgo is client-go's side of the side-by-side benchmark (tests/bench): a
// shared informer factory syncs one resource from the replay server; it prints one JSON line
// with the time to synced and the live heap it took.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
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
	flag.Parse()

	config := &rest.Config{Host: *server, QPS: -1}
	config.ContentType = "application/json"
	client := kubernetes.NewForConfigOrDie(config)
	factory := informers.NewSharedInformerFactory(client, 0)
	var informer cache.SharedIndexInformer
	switch *resource {
	case "pods":
		informer = factory.Core().V1().Pods().Informer()
	case "configmaps":
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
	before, rssBefore := heap(), rss()
	start := time.Now()
	ctx := context.Background()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		os.Exit(1)
	}
	elapsed := time.Since(start)
	after, rssAfter := heap(), rss()
	n := len(informer.GetStore().ListKeys())
	out, _ := json.Marshal(map[string]any{
		"client": "client-go", "n": n, "sync_seconds": elapsed.Seconds(),
		"heap_bytes": int64(after) - int64(before), "rss_bytes": int64(rssAfter) - int64(rssBefore),
	})
	fmt.Println(string(out))
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
