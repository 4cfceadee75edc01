// The 1.34.9 API server's validation of ResourceSlices (objects/validation.md), written
// from its messages independently of the plugin's C copy (src/dra/dra-slice-validate.c),
// for resourceslices.go: a write it refuses gets 422 and the same message.
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

// The API server's Status message for an invalid slice, or "".
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
	devices, _ := spec["devices"].([]interface{})
	if len(devices) > 128 {
		e = append(e, fmt.Sprintf("spec.devices: Too many: %d: must have at most 128 items", len(devices)))
	} else {
		for i := range devices {
			e = append(e, deviceErrs(devices, i)...)
		}
	}
	if len(e) == 0 {
		return ""
	}
	msg := e[0]
	if len(e) > 1 {
		msg = "[" + strings.Join(e, ", ") + "]"
	}
	return fmt.Sprintf("ResourceSlice.resource.k8s.io %q is invalid: %s", name, msg)
}
