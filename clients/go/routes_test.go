// Every route of openapi/openapi.yaml is callable from the Go client (issue 29): for each path
// and method, Routes names a method of *Client, and calling it (arguments made up from its
// signature) sends exactly that method to a path the template matches, as a recording
// httptest server sees it. A route of the document no method calls fails. BOARDD_OPENAPI
// overrides the document's path (default ../../openapi/openapi.yaml).
package boardd

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// openapiRoutes reads "METHOD /path" of the document's paths (two-space and four-space keys).
func openapiRoutes(t *testing.T) []string {
	path := os.Getenv("BOARDD_OPENAPI")
	if path == "" {
		path = "../../openapi/openapi.yaml"
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	defer f.Close()
	pathRe := regexp.MustCompile(`^  (/\S*):\s*$`)
	methodRe := regexp.MustCompile(`^    (get|put|post|patch|delete):`)
	var out []string
	cur, inPaths := "", false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, " ") && l != "" {
			inPaths = l == "paths:"
			cur = ""
			continue
		}
		if !inPaths {
			continue
		}
		if m := pathRe.FindStringSubmatch(l); m != nil {
			cur = m[1]
		} else if m := methodRe.FindStringSubmatch(l); m != nil && cur != "" {
			out = append(out, strings.ToUpper(m[1])+" "+cur)
		}
	}
	if len(out) < 40 {
		t.Fatalf("only %d routes read from %s", len(out), path)
	}
	return out
}

func argFor(t reflect.Type) reflect.Value {
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	switch {
	case t == ctxType:
		return reflect.ValueOf(context.Background())
	case t.Kind() == reflect.String:
		return reflect.ValueOf("x1").Convert(t)
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		return reflect.ValueOf(1).Convert(t)
	case t.Kind() == reflect.Func:
		return reflect.MakeFunc(t, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, t.NumOut())
			for i := range out {
				out[i] = reflect.Zero(t.Out(i))
			}
			return out
		})
	}
	return reflect.Zero(t)
}

func TestEveryOpenAPIRouteIsCallable(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/v1/events/stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	c := New(srv.URL, "tok")
	cv := reflect.ValueOf(c)
	doc := openapiRoutes(t)
	inDoc := map[string]bool{}
	for _, route := range doc {
		inDoc[route] = true
		name, ok := Routes[route]
		if !ok {
			t.Errorf("%s: no method of *Client calls it (Routes)", route)
			continue
		}
		m := cv.MethodByName(name)
		if !m.IsValid() {
			t.Errorf("%s: Routes names %s, which *Client does not have", route, name)
			continue
		}
		args := make([]reflect.Value, m.Type().NumIn())
		for i := range args {
			args[i] = argFor(m.Type().In(i))
		}
		mu.Lock()
		seen = nil
		mu.Unlock()
		out := m.Call(args)
		if last := out[len(out)-1]; !last.IsNil() {
			t.Errorf("%s: %s returned %v", route, name, last.Interface())
			continue
		}
		method, tmpl, _ := strings.Cut(route, " ")
		re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[^/]+?\\\}`).ReplaceAllString(
			regexp.QuoteMeta(tmpl), "[^/]+") + "$")
		mu.Lock()
		got := append([]string(nil), seen...)
		mu.Unlock()
		if len(got) != 1 || !strings.HasPrefix(got[0], method+" ") ||
			!re.MatchString(strings.TrimPrefix(got[0], method+" ")) {
			t.Errorf("%s: %s sent %v", route, name, got)
		}
	}
	var ahead []string
	for r := range Routes {
		if !inDoc[r] {
			ahead = append(ahead, r)
		}
	}
	sort.Strings(ahead)
	t.Logf("routes the client has ahead of this openapi.yaml: %v", ahead)
}
