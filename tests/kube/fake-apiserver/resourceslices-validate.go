// The 1.34.9 API server's validation of ResourceSlices (objects/validation.md), written
// from its messages independently of the plugin's C copy (src/dra/dra-slice-validate.c),
// for resourceslices.go: a write it refuses gets 422 and the same message. Partitionable
// devices (KEP-4815) as 1.36.3 validates them (dynamic-mig-mps-capacity.md §3.1): at most 8
// counter sets per slice, 32 counters per set, DNS-label names, 2 consumesCounters per
// device unique by counterSet, 32 counters per consumption, none empty, 64 devices when any
// consumes counters or has taints, and from 1.35 on (the version served on /version) a
// slice with both sharedCounters and devices refused.
package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

const (
	labelMsg     = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	subdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	cIdentMsg    = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')"
	selectors    = "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
)

var (
	labelRe     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	subdomainRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	cIdentRe    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// semver.org 2.0.0, as github.com/blang/semver/v4 parses it
	semverRe = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
		`(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?` +
		`(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
)

func subdomainErrs(field, v string) []string {
	var e []string
	if len(v) > 253 {
		e = append(e, fmt.Sprintf("%s: Invalid value: %q: must be no more than 253 characters", field, v))
	}
	if !subdomainRe.MatchString(v) {
		e = append(e, fmt.Sprintf("%s: Invalid value: %q: %s", field, v, subdomainMsg))
	}
	return e
}

func driverNameErrs(field, v string) []string {
	if len(v) > 63 {
		return []string{field + ": Too long: may not be more than 63 bytes"}
	}
	return subdomainErrs(field, strings.ToLower(v))
}

func cIdentErrs(field, v string) []string {
	if len(v) > 32 {
		return []string{field + ": Too long: may not be more than 32 bytes"}
	}
	if !cIdentRe.MatchString(v) {
		return []string{fmt.Sprintf("%s: Invalid value: %q: %s", field, v, cIdentMsg)}
	}
	return nil
}

func qualifiedErrs(field, name string) []string {
	parts := strings.Split(name, "/")
	switch len(parts) {
	case 1:
		return cIdentErrs(field, name)
	case 2:
		var e []string
		if parts[0] == "" {
			e = append(e, field+": Required value: the domain must not be empty")
		} else {
			e = append(e, driverNameErrs(field, parts[0])...)
		}
		if parts[1] == "" {
			e = append(e, field+": Required value: the name must not be empty")
		} else {
			e = append(e, cIdentErrs(field, parts[1])...)
		}
		return e
	}
	return []string{fmt.Sprintf("%s: Invalid value: %q: must be the domain and name separated by one slash", field, name)}
}

func goValue(v interface{}, quote bool) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if quote {
			b, _ := json.Marshal(x)
			return string(b)
		}
		return x
	case float64:
		return strconv.FormatInt(int64(x), 10)
	case bool:
		return strconv.FormatBool(x)
	}
	return "null"
}

func attributeErrs(field string, val map[string]interface{}) []string {
	set := 0
	for _, k := range []string{"int", "bool", "string", "version"} {
		if v, ok := val[k]; ok && v != nil {
			set++
		}
	}
	if set == 0 {
		return []string{field + ": Required value: exactly one value must be specified"}
	}
	if set > 1 {
		return []string{fmt.Sprintf(`%s: Invalid value: {"IntValue":%s,"BoolValue":%s,"StringValue":%s,"VersionValue":%s}: exactly one value must be specified`,
			field, goValue(val["int"], false), goValue(val["bool"], false), goValue(val["string"], true), goValue(val["version"], true))}
	}
	var e []string
	if s, ok := val["string"].(string); ok && len(s) > 64 {
		e = append(e, field+".string: Too long: may not be more than 64 bytes")
	}
	if s, ok := val["version"].(string); ok {
		if len(s) > 64 {
			e = append(e, field+".version: Too long: may not be more than 64 bytes")
		} else if !semverRe.MatchString(s) {
			e = append(e, fmt.Sprintf("%s.version: Invalid value: %q: must be a string compatible with semver.org spec 2.0.0", field, s))
		}
	}
	return e
}

func sortedKeys(m map[string]interface{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// A counter set's or counter's name: a DNS label (validateCounterName).
func counterNameErrs(field, v string) []string {
	var e []string
	if len(v) > 63 {
		e = append(e, fmt.Sprintf("%s: Invalid value: %q: must be no more than 63 characters", field, v))
	}
	if !labelRe.MatchString(v) {
		e = append(e, fmt.Sprintf("%s: Invalid value: %q: %s", field, v, labelMsg))
	}
	return e
}

// A map of counters (a set's or a consumption's): required, at most 32, names DNS labels,
// each with a value.
func countersErrs(field string, m interface{}) []string {
	counters, _ := m.(map[string]interface{})
	if len(counters) == 0 {
		return []string{field + ": Required value"}
	}
	if len(counters) > 32 {
		return []string{fmt.Sprintf("%s: Too many: %d: must have at most 32 items", field, len(counters))}
	}
	var e []string
	for _, k := range sortedKeys(counters) {
		e = append(e, counterNameErrs(fmt.Sprintf("%s[%s]", field, k), k)...)
		c, _ := counters[k].(map[string]interface{})
		if v, _ := c["value"].(string); v == "" {
			e = append(e, fmt.Sprintf("%s[%s].value: Required value", field, k))
		}
	}
	return e
}

// spec.sharedCounters (validateSet(..., ResourceSliceMaxCounterSets) and validateCounterSet).
func counterSetsErrs(sets []interface{}) []string {
	if len(sets) > 8 {
		return []string{fmt.Sprintf("spec.sharedCounters: Too many: %d: must have at most 8 items", len(sets))}
	}
	var e []string
	seen := map[string]bool{}
	for i, si := range sets {
		set, _ := si.(map[string]interface{})
		field := fmt.Sprintf("spec.sharedCounters[%d]", i)
		name, _ := set["name"].(string)
		if name == "" {
			e = append(e, field+".name: Required value")
		} else {
			e = append(e, counterNameErrs(field+".name", name)...)
			if seen[name] {
				e = append(e, fmt.Sprintf("%s: Duplicate value: %q", field, name))
			}
			seen[name] = true
		}
		e = append(e, countersErrs(field+".counters", set["counters"])...)
	}
	return e
}

// A device's consumesCounters: at most 2, unique by counterSet.
func consumesErrs(dev string, uses []interface{}) []string {
	if len(uses) > 2 {
		return []string{fmt.Sprintf("%s.consumesCounters: Too many: %d: must have at most 2 items", dev, len(uses))}
	}
	var e []string
	seen := map[string]bool{}
	for i, ui := range uses {
		use, _ := ui.(map[string]interface{})
		field := fmt.Sprintf("%s.consumesCounters[%d]", dev, i)
		cs, _ := use["counterSet"].(string)
		if cs == "" {
			e = append(e, field+".counterSet: Required value")
		} else {
			e = append(e, counterNameErrs(field+".counterSet", cs)...)
			if seen[cs] {
				e = append(e, fmt.Sprintf("%s: Duplicate value: %q", field, cs))
			}
			seen[cs] = true
		}
		e = append(e, countersErrs(field+".counters", use["counters"])...)
	}
	return e
}

// Whether gitVersion (v1.36.3, v1.35.0-rc.1, ...) is 1.35.0 or later in semver order
// (a pre-release of 1.35.0 is before it).
func atLeast135(gitVersion string) bool {
	v := strings.TrimPrefix(gitVersion, "v")
	pre := ""
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		if v[i] == '-' {
			pre = v[i+1:]
		}
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	num := func(i int) int {
		if i >= len(parts) {
			return 0
		}
		n, _ := strconv.Atoi(parts[i])
		return n
	}
	switch {
	case num(0) != 1:
		return num(0) > 1
	case num(1) != 35:
		return num(1) > 35
	}
	return num(2) > 0 || pre == ""
}

func deviceErrs(devices []interface{}, i int) []string {
	d, _ := devices[i].(map[string]interface{})
	dev := fmt.Sprintf("spec.devices[%d]", i)
	var e []string
	name, _ := d["name"].(string)
	if name == "" {
		e = append(e, dev+".name: Required value")
	} else {
		if len(name) > 63 {
			e = append(e, fmt.Sprintf("%s.name: Invalid value: %q: must be no more than 63 characters", dev, name))
		}
		if !labelRe.MatchString(name) {
			e = append(e, fmt.Sprintf("%s.name: Invalid value: %q: %s", dev, name, labelMsg))
		}
		for j := 0; j < i; j++ {
			if o, _ := devices[j].(map[string]interface{}); o["name"] == name {
				e = append(e, fmt.Sprintf("%s.name: Duplicate value: %q", dev, name))
				break
			}
		}
	}
	attrs, _ := d["attributes"].(map[string]interface{})
	caps, _ := d["capacity"].(map[string]interface{})
	for _, k := range sortedKeys(attrs) {
		field := fmt.Sprintf("%s.attributes[%s]", dev, k)
		e = append(e, qualifiedErrs(field, k)...)
		v, _ := attrs[k].(map[string]interface{})
		e = append(e, attributeErrs(field, v)...)
	}
	for _, k := range sortedKeys(caps) {
		e = append(e, qualifiedErrs(fmt.Sprintf("%s.capacity[%s]", dev, k), k)...)
	}
	if n := len(attrs) + len(caps); n > 32 {
		e = append(e, fmt.Sprintf("%s: Invalid value: %d: the total number of attributes and capacities must not exceed 32", dev, n))
	}
	uses, _ := d["consumesCounters"].([]interface{})
	e = append(e, consumesErrs(dev, uses)...)
	taints, _ := d["taints"].([]interface{})
	if len(taints) > 4 {
		return append(e, fmt.Sprintf("%s.taints: Too many: %d: must have at most 4 items", dev, len(taints)))
	}
	for t, ti := range taints {
		taint, _ := ti.(map[string]interface{})
		if k, _ := taint["key"].(string); k == "" {
			e = append(e, fmt.Sprintf("%s.taints[%d].key: Required value", dev, t))
		}
		switch eff, _ := taint["effect"].(string); eff {
		case "NoSchedule", "NoExecute":
		case "":
			e = append(e, fmt.Sprintf("%s.taints[%d].effect: Required value", dev, t))
		default:
			e = append(e, fmt.Sprintf(`%s.taints[%d].effect: Unsupported value: %q: supported values: "NoExecute", "NoSchedule"`, dev, t, eff))
		}
	}
	return e
}

// The API server's Status message for an invalid slice, or "" (the version served and the
// taints gate from rs; called with the server's mu held, after rsPartitions).
func rsValidate(o map[string]interface{}, name string) string {
	var e []string
	spec, _ := o["spec"].(map[string]interface{})
	if drv, _ := spec["driver"].(string); drv == "" {
		e = append(e, "spec.driver: Required value")
	} else {
		e = append(e, driverNameErrs("spec.driver", drv)...)
	}
	pool, _ := spec["pool"].(map[string]interface{})
	if pn, _ := pool["name"].(string); pn == "" {
		e = append(e, "spec.pool.name: Required value")
	} else if len(pn) > 253 {
		e = append(e, "spec.pool.name: Too long: may not be more than 253 bytes")
	} else {
		for _, part := range strings.Split(pn, "/") {
			e = append(e, subdomainErrs("spec.pool.name", part)...)
		}
	}
	if g, _ := pool["generation"].(float64); g < 0 {
		e = append(e, fmt.Sprintf("spec.pool.generation: Invalid value: %d: must be greater than or equal to zero", int64(g)))
	}
	if c, _ := pool["resourceSliceCount"].(float64); c <= 0 {
		e = append(e, fmt.Sprintf("spec.pool.resourceSliceCount: Invalid value: %d: must be greater than zero", int64(c)))
	}
	node, _ := spec["nodeName"].(string)
	var set []string
	if node != "" {
		set = append(set, "`nodeName`")
	}
	if spec["nodeSelector"] != nil {
		set = append(set, "`nodeSelector`")
	}
	if b, _ := spec["allNodes"].(bool); b {
		set = append(set, "`allNodes`")
	}
	if b, _ := spec["perDeviceNodeSelection"].(bool); b {
		set = append(set, "`perDeviceNodeSelection`")
	}
	if len(set) == 0 {
		e = append(e, "spec: Required value: exactly one of "+selectors+" is required")
	} else if len(set) > 1 {
		e = append(e, fmt.Sprintf(`spec: Invalid value: "{%s}": exactly one of %s is required, but multiple fields are set`, strings.Join(set, ", "), selectors))
	}
	if node != "" {
		e = append(e, subdomainErrs("spec.nodeName", node)...)
	}
	if spec["sharedCounters"] != nil && spec["devices"] != nil && atLeast135(rs.version) {
		e = append(e, "spec: Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed")
	}
	devices, _ := spec["devices"].([]interface{})
	maxDevices := 128
	for _, di := range devices {
		d, _ := di.(map[string]interface{})
		if t, _ := d["taints"].([]interface{}); len(t) > 0 && rs.taints {
			maxDevices = 64
		}
		if c, _ := d["consumesCounters"].([]interface{}); len(c) > 0 {
			maxDevices = 64
		}
	}
	if len(devices) > maxDevices {
		e = append(e, fmt.Sprintf("spec.devices: Too many: %d: must have at most %d items", len(devices), maxDevices))
	} else {
		for i := range devices {
			e = append(e, deviceErrs(devices, i)...)
		}
	}
	sets, _ := spec["sharedCounters"].([]interface{})
	e = append(e, counterSetsErrs(sets)...)
	if len(e) == 0 {
		return ""
	}
	msg := e[0]
	if len(e) > 1 {
		msg = "[" + strings.Join(e, ", ") + "]"
	}
	return fmt.Sprintf("ResourceSlice.resource.k8s.io %q is invalid: %s", name, msg)
}
