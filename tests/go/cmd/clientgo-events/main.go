// Command clientgo-events is the client-go side of the differential end-to-end test: it runs
// client-go's shared informers (dynamic factory, default options) for the given resources and
// prints every handler call as one JSON line, in the same format as informer-gen's `watch`
// example:
//
//	{"type":"ADDED","key":"ns/name","resourceVersion":"12","initial":true}
//	{"type":"SYNCED"}
//	{"type":"UPDATED","key":"ns/name","resourceVersion":"15"}
//	{"type":"DELETED","key":"ns/name","resourceVersion":"15","tombstone":true}
//
// On SIGTERM or SIGINT it writes the final cache (key -> resourceVersion) to --dump and exits 0.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type event struct {
	Type            string `json:"type"`
	Resource        string `json:"resource,omitempty"`
	Key             string `json:"key,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Initial         bool   `json:"initial,omitempty"`
	Tombstone       bool   `json:"tombstone,omitempty"`
}

var (
	outMu sync.Mutex
	out   = bufio.NewWriter(os.Stdout)
)

func emit(e event) {
	line, _ := json.Marshal(e)
	outMu.Lock()
	defer outMu.Unlock()
	out.Write(line)
	out.WriteByte('\n')
	out.Flush()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "clientgo-events: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig path (default: the usual lookup)")
	namespace := flag.String("namespace", "", "watch only this namespace (default: all)")
	dump := flag.String("dump", "", "on SIGTERM/SIGINT, write the final cache here as one JSON object")
	flag.Parse()
	if flag.NArg() == 0 {
		fail("usage: clientgo-events [--kubeconfig F] [--namespace NS] [--dump F] RESOURCE...")
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		fail("client: %v", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		fail("discovery: %v", err)
	}
	groups, err := restmapper.GetAPIGroupResources(disco)
	if err != nil {
		fail("discovery: %v", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)

	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, *namespace, nil)
	informers := map[string]cache.SharedIndexInformer{}
	var registrations []cache.ResourceEventHandlerRegistration
	for _, arg := range flag.Args() {
		gvr, err := mapper.ResourceFor(schema.ParseGroupResource(arg).WithVersion(""))
		if err != nil {
			fail("resource %q: %v", arg, err)
		}
		name := arg
		informer := factory.ForResource(gvr).Informer()
		reg, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				emit(event{Type: "ADDED", Resource: name, Key: key(obj), ResourceVersion: rv(obj), Initial: initial})
			},
			UpdateFunc: func(_, obj any) {
				emit(event{Type: "UPDATED", Resource: name, Key: key(obj), ResourceVersion: rv(obj)})
			},
			DeleteFunc: func(obj any) {
				tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
				if isTomb {
					obj = tomb.Obj
				}
				emit(event{Type: "DELETED", Resource: name, Key: key(obj), ResourceVersion: rv(obj), Tombstone: isTomb})
			},
		})
		if err != nil {
			fail("handler: %v", err)
		}
		informers[name] = informer
		registrations = append(registrations, reg)
	}

	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	for gvr, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			fail("cache of %v never synced", gvr)
		}
	}
	// Handlers are called from their own goroutines; wait until they have seen the initial list.
	for _, reg := range registrations {
		for !reg.HasSynced() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	emit(event{Type: "SYNCED"})

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	cancel()
	if *dump != "" {
		final := map[string]string{}
		for name, informer := range informers {
			for _, obj := range informer.GetStore().List() {
				prefix := ""
				if len(informers) > 1 {
					prefix = name + ":"
				}
				final[prefix+key(obj)] = rv(obj)
			}
		}
		data, _ := json.Marshal(final)
		if err := os.WriteFile(*dump, data, 0o644); err != nil {
			fail("dump: %v", err)
		}
	}
	outMu.Lock()
	out.Flush()
}

func key(obj any) string {
	k, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return "?"
	}
	return k
}

func rv(obj any) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.GetResourceVersion()
	}
	return ""
}
