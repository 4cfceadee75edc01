// helm-render: renders a Helm chart's templates with Go's text/template and
// the subset of Helm's template functions the gpu-device-plugin chart uses,
// so the tests can check real output without Helm (not packaged in Debian).
//
// usage: helm-render <chart-dir> <context.json>
//
// context.json holds what Helm would compute: {"Values": merged values,
// "Chart": {"Name", "Version", "AppVersion"}, "Release": {"Name",
// "Namespace", "Service"}}, optionally "Capabilities": {"KubeVersion":
// {"Version", "Major", "Minor"}} (absent: an empty version, i.e. unknown) and
// "Lookup": {"<apiVersion>/<kind>/<namespace>/<name>": object}, what lookup
// answers as a cluster would (absent: the empty map helm template gets offline). The YAML side (values files, fromYaml) is done
// by /usr/bin/python3 with python3-yaml, since Debian's Go has no YAML package.
//
// Output: each rendered file as "---\n# Source: <name>\n<text>". A template
// error or a call of fail exits 2 with the message on stderr.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

func die(code int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "helm-render: "+format+"\n", args...)
	os.Exit(code)
}

// empty follows Helm's (sprig's) idea of an unset value.
func empty(v interface{}) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String, reflect.Map, reflect.Slice, reflect.Array:
		return r.Len() == 0
	case reflect.Bool:
		return !r.Bool()
	case reflect.Float32, reflect.Float64:
		return r.Float() == 0
	case reflect.Int, reflect.Int64:
		return r.Int() == 0
	}
	return false
}

func toString(v interface{}) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func yamlScalar(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		b, _ := json.Marshal(x)
		return string(b)
	default:
		return fmt.Sprint(x)
	}
}

// yamlLines emits block YAML (sorted keys, like Helm's toYaml).
func yamlLines(v interface{}) []string {
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			return []string{"{}"}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			key := yamlScalar(k)
			sub := x[k]
			if isCollection(sub) {
				out = append(out, key+":")
				for _, l := range yamlLines(sub) {
					out = append(out, "  "+l)
				}
			} else {
				out = append(out, key+": "+yamlScalar(sub))
			}
		}
		return out
	case []interface{}:
		if len(x) == 0 {
			return []string{"[]"}
		}
		var out []string
		for _, item := range x {
			sub := yamlLines(item)
			out = append(out, "- "+sub[0])
			for _, l := range sub[1:] {
				out = append(out, "  "+l)
			}
		}
		return out
	}
	return []string{yamlScalar(v)}
}

func isCollection(v interface{}) bool {
	switch x := v.(type) {
	case map[string]interface{}:
		return len(x) > 0
	case []interface{}:
		return len(x) > 0
	}
	return false
}

func fromYaml(text string) (map[string]interface{}, error) {
	cmd := exec.Command("/usr/bin/python3", "-c",
		"import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin) or {}, sys.stdout)")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.Output()
	if err != nil {
		// Helm returns {"Error": ...} instead of failing.
		return map[string]interface{}{"Error": err.Error()}, nil
	}
	var m map[string]interface{}
	if err := json.Unmarshal(out, &m); err != nil {
		return map[string]interface{}{"Error": err.Error()}, nil
	}
	return m, nil
}

func deepCopy(v interface{}) interface{} {
	b, _ := json.Marshal(v)
	var out interface{}
	_ = json.Unmarshal(b, &out)
	if out == nil {
		return map[string]interface{}{}
	}
	return out
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// semverCompare checks one constraint "<op>X.Y.Z[-pre]" (op one of < <= > >= =)
// on major.minor.patch only, which is what "<1.34.0-0" means to Helm's semver for any
// version (the -0 admits every pre-release); other constraint forms are an error, so
// a template cannot get an answer Helm would not give.
func semverCompare(constraint, version string) (bool, error) {
	m := regexp.MustCompile(`^\s*(<=|>=|<|>|=)?\s*v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?\s*$`).FindStringSubmatch(constraint)
	if m == nil {
		return false, fmt.Errorf("semverCompare: constraint %q not supported by helm-render", constraint)
	}
	v := regexp.MustCompile(`^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?([-+].*)?$`).FindStringSubmatch(version)
	if v == nil {
		return false, fmt.Errorf("semverCompare: %q is not a version", version)
	}
	cmp := 0
	for i := 1; i <= 3 && cmp == 0; i++ {
		a, _ := strconv.Atoi(v[i])
		b, _ := strconv.Atoi(m[i+1])
		if a < b {
			cmp = -1
		} else if a > b {
			cmp = 1
		}
	}
	switch m[1] {
	case "<":
		return cmp < 0, nil
	case "<=":
		return cmp <= 0, nil
	case ">":
		return cmp > 0, nil
	case ">=":
		return cmp >= 0, nil
	}
	return cmp == 0, nil
}

func funcs(root **template.Template, lookups map[string]interface{}) template.FuncMap {
	return template.FuncMap{
		// Helm's lookup: the object (or, without a name, {"items": [...]}) the context's
		// "Lookup" holds under "<apiVersion>/<kind>/<namespace>/<name>", else an empty map.
		"lookup": func(apiVersion, kind, namespace, name string) map[string]interface{} {
			if obj, ok := lookups[apiVersion+"/"+kind+"/"+namespace+"/"+name].(map[string]interface{}); ok {
				return obj
			}
			return map[string]interface{}{}
		},
		"regexMatch": func(re, s string) (bool, error) {
			r, err := regexp.Compile(re)
			if err != nil {
				return false, err
			}
			return r.MatchString(s), nil
		},
		"semverCompare": semverCompare,
		"include": func(name string, data interface{}) (string, error) {
			var buf bytes.Buffer
			err := (*root).ExecuteTemplate(&buf, name, data)
			return buf.String(), err
		},
		"fail":     func(msg string) (string, error) { return "", errors.New(msg) },
		"toYaml":   func(v interface{}) string { return strings.Join(yamlLines(v), "\n") },
		"fromYaml": fromYaml,
		"indent":   indent,
		"nindent":  func(n int, s string) string { return "\n" + indent(n, s) },
		"quote": func(vs ...interface{}) string {
			var out []string
			for _, v := range vs {
				if v != nil {
					out = append(out, fmt.Sprintf("%q", toString(v)))
				}
			}
			return strings.Join(out, " ")
		},
		"default": func(d interface{}, given ...interface{}) interface{} {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"empty": empty,
		"ternary": func(t, f interface{}, cond bool) interface{} {
			if cond {
				return t
			}
			return f
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"toString":   toString,
		"typeIs":     func(t string, v interface{}) bool { return t == fmt.Sprintf("%T", v) },
		"kindIs": func(k string, v interface{}) bool {
			return k == reflect.ValueOf(v).Kind().String()
		},
		"join": func(sep string, v interface{}) string {
			var parts []string
			if l, ok := v.([]interface{}); ok {
				for _, x := range l {
					parts = append(parts, toString(x))
				}
				return strings.Join(parts, sep)
			}
			return toString(v)
		},
		"list": func(v ...interface{}) []interface{} { return v },
		"has": func(needle interface{}, hay interface{}) bool {
			l, _ := hay.([]interface{})
			for _, x := range l {
				if reflect.DeepEqual(x, needle) {
					return true
				}
			}
			return false
		},
		"dict": func(kv ...interface{}) map[string]interface{} {
			m := map[string]interface{}{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[toString(kv[i])] = kv[i+1]
			}
			return m
		},
		"hasKey": func(m map[string]interface{}, k string) bool { _, ok := m[k]; return ok },
		"set": func(m map[string]interface{}, k string, v interface{}) map[string]interface{} {
			m[k] = v
			return m
		},
		"deepCopy": deepCopy,
		// What NVIDIA's chart (v0.20.0) also uses, for rendering it in the tests that
		// run its pod specs with our image.
		"keys": func(m map[string]interface{}) []interface{} {
			var ks []string
			for k := range m {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			out := make([]interface{}, len(ks))
			for i, k := range ks {
				out[i] = k
			}
			return out
		},
		"trim":  strings.TrimSpace,
		"clean": filepath.Clean,
		"int": func(v interface{}) int {
			switch x := v.(type) {
			case float64:
				return int(x)
			case int:
				return x
			case string:
				var n int
				fmt.Sscanf(x, "%d", &n)
				return n
			}
			return 0
		},
		"mustToJson": func(v interface{}) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"fromJson": func(s string) interface{} {
			var v interface{}
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				return map[string]interface{}{"Error": err.Error()}
			}
			return v
		},
		"sha256sum": func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		},
	}
}

func main() {
	if len(os.Args) != 3 {
		die(1, "usage: helm-render <chart-dir> <context.json>")
	}
	chartDir := os.Args[1]
	raw, err := os.ReadFile(os.Args[2])
	if err != nil {
		die(1, "%v", err)
	}
	var ctx map[string]interface{}
	if err := json.Unmarshal(raw, &ctx); err != nil {
		die(1, "%s: %v", os.Args[2], err)
	}
	chart, _ := ctx["Chart"].(map[string]interface{})
	name := toString(chart["Name"])

	paths, _ := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	sort.Strings(paths)
	var root *template.Template
	lookups, _ := ctx["Lookup"].(map[string]interface{})
	delete(ctx, "Lookup")
	if _, ok := ctx["Capabilities"]; !ok {
		ctx["Capabilities"] = map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": "", "Major": "", "Minor": ""}}
	}
	root = template.New(name).Funcs(funcs(&root, lookups)).Option("missingkey=zero")
	var names []string
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			die(1, "%v", err)
		}
		tname := name + "/templates/" + filepath.Base(p)
		if _, err := root.New(tname).Parse(string(text)); err != nil {
			die(2, "parse: %v", err)
		}
		if !strings.HasPrefix(filepath.Base(p), "_") {
			names = append(names, tname)
		}
	}
	for _, tname := range names {
		data := map[string]interface{}{}
		for k, v := range ctx {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": tname, "BasePath": name + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, data); err != nil {
			die(2, "%v", err)
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		fmt.Printf("---\n# Source: %s\n%s\n", tname, out)
	}
}
