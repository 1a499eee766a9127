// Command proto-descriptors writes the protobuf field tables of every built-in Kubernetes
// type (all kinds in client-go's scheme and the types they reach) as JSON, for the generator
// to embed: informer-gen decodes protobuf with these tables (generator/data/).
//
//	proto-descriptors > generator/data/k8s-protobuf.json
//
// The tables come from the Go types' struct tags, the only place that has all of it: the
// field number (`protobuf:"bytes,2,opt,name=spec"`), the JSON name and omitempty (`json`),
// and whether a field is a pointer. Per message, one row per field:
//
//	[number, "jsonName", "kind", "flags"]
//
// kind is a scalar (bool int32 int64 uint32 uint64 double float string bytes), a special
// (time microtime duration quantity intorstring rawjson), "map:<value kind>", a message name
// (its Go package path with dots, then the type name: k8s.io.api.core.v1.PodSpec, the
// OpenAPI definition name with its first two labels swapped), or "unsupported:<why>".
// flags: r repeated, z omitted from JSON when zero (a non-pointer omitempty scalar, which
// protobuf always writes), i inline (the message's fields are the parent's in JSON).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes/scheme"
)

type field struct {
	number int
	name   string
	kind   string
	flags  string
}

var (
	messages = map[string][]field{}
	pending  []reflect.Type
)

var specials = map[string]string{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":       "time",
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":  "microtime",
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":   "duration",
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":   "rawjson",
	"k8s.io/apimachinery/pkg/runtime.RawExtension":    "rawjson",
	"k8s.io/apimachinery/pkg/api/resource.Quantity":   "quantity",
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": "intorstring",
}

func messageName(t reflect.Type) string {
	return strings.ReplaceAll(t.PkgPath(), "/", ".") + "." + t.Name()
}

// kindOf names the kind of a value of type t; nested messages are queued.
func kindOf(t reflect.Type) string {
	if s, ok := specials[t.PkgPath()+"."+t.Name()]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.Ptr:
		return kindOf(t.Elem())
	case reflect.Bool:
		return "bool"
	case reflect.Int32:
		return "int32"
	case reflect.Int64, reflect.Int:
		return "int64"
	case reflect.Uint32:
		return "uint32"
	case reflect.Uint64:
		return "uint64"
	case reflect.Float64:
		return "double"
	case reflect.Float32:
		return "float"
	case reflect.String:
		return "string"
	case reflect.Struct:
		name := messageName(t)
		if _, seen := messages[name]; !seen {
			messages[name] = nil
			pending = append(pending, t)
		}
		return name
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return "unsupported:map key " + t.Key().String()
		}
		v := t.Elem()
		if v.Kind() == reflect.Slice && v.Elem().Kind() != reflect.Uint8 {
			return "unsupported:map of lists " + t.String()
		}
		return "map:" + kindOf(v)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
	}
	return "unsupported:" + t.String()
}

func describe(t reflect.Type) []field {
	var fields []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("protobuf")
		if !ok || tag == "-" {
			continue
		}
		parts := strings.Split(tag, ",")
		number, err := strconv.Atoi(parts[1])
		if err != nil {
			panic(fmt.Sprintf("%s.%s: protobuf tag %q", t, f.Name, tag))
		}
		jsonTag := strings.Split(f.Tag.Get("json"), ",")
		name := jsonTag[0]
		omitempty, inline := false, false
		for _, o := range jsonTag[1:] {
			omitempty = omitempty || o == "omitempty"
			inline = inline || o == "inline"
		}
		if name == "-" {
			continue
		}
		ft := f.Type
		flags := ""
		if inline {
			flags += "i"
		}
		kind := ""
		switch {
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 && specials[ft.PkgPath()+"."+ft.Name()] == "":
			if ft.Elem().Kind() == reflect.Slice && ft.Elem().Elem().Kind() != reflect.Uint8 {
				kind = "unsupported:list of lists " + ft.String()
			} else {
				kind = kindOf(ft.Elem())
			}
			flags += "r"
		default:
			kind = kindOf(ft)
			switch ft.Kind() {
			case reflect.Bool, reflect.Int32, reflect.Int64, reflect.Int, reflect.Uint32, reflect.Uint64,
				reflect.Float32, reflect.Float64, reflect.String:
				if omitempty {
					flags += "z"
				}
			}
		}
		fields = append(fields, field{number, name, kind, flags})
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].number < fields[j].number })
	return fields
}

func main() {
	for _, t := range scheme.Scheme.AllKnownTypes() {
		if t.PkgPath() == "" || !strings.HasPrefix(t.PkgPath(), "k8s.io/") {
			continue
		}
		kindOf(t)
	}
	for len(pending) > 0 {
		t := pending[0]
		pending = pending[1:]
		messages[messageName(t)] = describe(t)
	}
	names := make([]string, 0, len(messages))
	for n := range messages {
		names = append(names, n)
	}
	sort.Strings(names)
	out := os.Stdout
	fmt.Fprintln(out, "{")
	for i, n := range names {
		rows := make([]string, 0, len(messages[n]))
		for _, f := range messages[n] {
			row, _ := json.Marshal([]any{f.number, f.name, f.kind, f.flags})
			rows = append(rows, string(row))
		}
		sep := ","
		if i == len(names)-1 {
			sep = ""
		}
		fmt.Fprintf(out, "%q: [%s]%s\n", n, strings.Join(rows, ", "), sep)
	}
	fmt.Fprintln(out, "}")
}
