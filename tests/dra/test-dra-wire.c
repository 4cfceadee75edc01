/* DRA wire-vector test: decodes every message the 1.34 kubelet exchanges with a DRA
 * plugin ($GDP_TEST_DATA/dra/wire/NAME.bin, made by the kubelet's own Go types) with our
 * protobuf-c code from api/dra_*.proto and api/pluginregistration.proto, and compares
 * it field by field with the manifest's `content`.
 *
 * The comparison walks the protobuf-c descriptors, so every field of every message is
 * checked, defaults included. Manifest conventions: maps are unordered sets (a map
 * entry without its value is an empty message), enums are shown by name, and fields
 * the schema marks `only_in` (k8s.io/kubelet v0.36: Device.share_id, DeviceHealth
 * fields 4 and 5) came after 1.34: a vector carrying them must decode (DeviceHealth's
 * kept as unknown fields; share_id, which we send for GPU shares, as ours), and without
 * them encode to exactly the bytes of its 1.34 twin. Every message is re-encoded and must give back the same bytes (protobuf-c
 * and both Go encoders write fields in number order; the vectors' map keys are sorted). */
#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/macro.h"
#include "dra_health_v1alpha1.pb-c.h"
#include "dra_v1.pb-c.h"
#include "dra_v1beta1.pb-c.h"
#include "pluginregistration.pb-c.h"
#include "tests/common/fixture.h"

static int failures;
static json_t *schema; /* manifest "schema": message name -> {fields: [...]} */

_printf_(2, 3) static void fail(const char *where, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s: ", where);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    failures++;
}

static const ProtobufCMessageDescriptor *const messages[] = {
    &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
    &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor,
    &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
    &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor,
    &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_request__descriptor,
    &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__descriptor,
    &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_request__descriptor,
    &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_response__descriptor,
    &pluginregistration__info_request__descriptor,
    &pluginregistration__plugin_info__descriptor,
    &pluginregistration__registration_status__descriptor,
    &pluginregistration__registration_status_response__descriptor,
    &v1alpha1__node_watch_resources_request__descriptor,
    &v1alpha1__node_watch_resources_response__descriptor,
};

static const ProtobufCMessageDescriptor *find_message(const char *full_name)
{
    for (size_t i = 0; i < ELEMENTSOF(messages); i++)
        if (streq(messages[i]->name, full_name))
            return messages[i];
    return NULL;
}

/* A content key our descriptor lacks is fine only if the manifest's schema says the
 * field exists in a later kubelet (`only_in`); anything else would be skipped silently. */
static bool is_later_field(const ProtobufCMessageDescriptor *d, const char *key)
{
    json_t *fields = json_object_get(json_object_get(schema, d->name), "fields"), *f;
    size_t i;
    json_array_foreach(fields, i, f)
        if (streq(json_string_value(json_object_get(f, "name")) ?: "", key))
            return json_object_get(f, "only_in") != NULL;
    return false;
}

/* A field of ours that the manifest's schema says a later kubelet added (Device.share_id,
 * which we send for shares): a 1.34 kubelet skips it, as it skips an unknown field. */
static bool is_later_known(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f)
{
    return is_later_field(d, f->name);
}

static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
    return d->n_fields == 2 && streq(d->fields[0].name, "key") &&
           streq(d->fields[1].name, "value") && d->fields[0].type == PROTOBUF_C_TYPE_STRING;
}

static void compare_message(const ProtobufCMessage *m, json_t *want, const char *path);

/* One value of a singular field or one element of a repeated one. `want` NULL means
 * "not in content": the proto3 default is expected. */
static void compare_value(const ProtobufCFieldDescriptor *f, const void *member, json_t *want,
                          const char *path)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)member;
        const char *w = want ? json_string_value(want) : "";
        if (!w)
            fail(path, "content is not a string");
        else if (!s || !streq(s, w))
            fail(path, "got \"%s\", want \"%s\"", s ? s : "(null)", w);
        break;
    }
    case PROTOBUF_C_TYPE_BOOL: {
        bool b = *(const protobuf_c_boolean *)member;
        if (want && !json_is_boolean(want))
            fail(path, "content is not a boolean");
        else if (b != (want ? json_is_true(want) : false))
            fail(path, "got %s", b ? "true" : "false");
        break;
    }
    case PROTOBUF_C_TYPE_INT64: {
        int64_t v = *(const int64_t *)member;
        if (want && !json_is_integer(want))
            fail(path, "content is not an integer");
        else if (v != (want ? json_integer_value(want) : 0))
            fail(path, "got %" PRId64 ", want %" JSON_INTEGER_FORMAT, v,
                 want ? json_integer_value(want) : 0);
        break;
    }
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)member;
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(ed, v);
        const char *w = want ? json_string_value(want) : ed->values[0].name;
        if (!w)
            fail(path, "content is not an enum name");
        else if (!ev || !streq(ev->name, w))
            fail(path, "got %d (%s), want %s", v, ev ? ev->name : "?", w);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)member;
        if (!want || json_is_null(want)) {
            if (sub)
                fail(path, "message set, want unset");
        } else if (!sub) {
            fail(path, "message unset, want an object");
        } else {
            compare_message(sub, want, path);
        }
        break;
    }
    default:
        fail(path, "field type %d not handled by this test", (int)f->type);
    }
}

/* A map field: repeated key/value entries compared as an unordered set. */
static void compare_map(size_t n, ProtobufCMessage *const *entries, json_t *want,
                        const char *path)
{
    if (want && !json_is_object(want)) {
        fail(path, "content is not an object");
        return;
    }
    if (n != (want ? json_object_size(want) : 0))
        fail(path, "%zu entries, want %zu", n, want ? json_object_size(want) : 0);
    for (size_t i = 0; i < n; i++) {
        const ProtobufCMessageDescriptor *ed = entries[i]->descriptor;
        const ProtobufCFieldDescriptor *vf = &ed->fields[1];
        const char *key = *(char *const *)((const char *)entries[i] + ed->fields[0].offset);
        const void *val = (const char *)entries[i] + vf->offset;
        json_t *w = want ? json_object_get(want, key) : NULL;
        char sub[600];

        snprintf(sub, sizeof(sub), "%s[\"%s\"]", path, key);
        if (!w) {
            fail(path, "unexpected key \"%s\"", key);
        } else if (vf->type == PROTOBUF_C_TYPE_MESSAGE &&
                   !*(ProtobufCMessage *const *)val) {
            /* value left out on the wire: an empty message (manifest: empty_map_values) */
            const ProtobufCMessageDescriptor *vd = vf->descriptor;
            ProtobufCMessage *empty = xcalloc(1, vd->sizeof_message);
            protobuf_c_message_init(vd, empty);
            compare_message(empty, w, sub);
            free(empty);
        } else {
            compare_value(vf, val, w, sub);
        }
        for (size_t j = 0; j < i; j++) {
            const char *other =
                *(char *const *)((const char *)entries[j] + ed->fields[0].offset);
            if (streq(other, key))
                fail(path, "duplicate key \"%s\"", key);
        }
    }
}

static void compare_message(const ProtobufCMessage *m, json_t *want, const char *path)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *key;
    json_t *v;
    char sub[512];

    if (!json_is_object(want)) {
        fail(path, "content is not an object");
        return;
    }
    json_object_foreach(want, key, v)
        if (!protobuf_c_message_descriptor_get_field_by_name(d, key) && !is_later_field(d, key))
            fail(path, "content has field \"%s\" that %s does not have", key, d->name);

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *member = (const char *)m + f->offset;
        json_t *w = json_object_get(want, f->name);

        snprintf(sub, sizeof(sub), "%s.%s", path, f->name);
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            compare_value(f, member, w, sub);
            continue;
        }
        size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
        const char *array = *(char *const *)member;
        if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
            compare_map(n, (ProtobufCMessage *const *)array, w, sub);
            continue;
        }
        if (w && !json_is_array(w)) {
            fail(sub, "content is not an array");
            continue;
        }
        size_t want_n = w ? json_array_size(w) : 0;
        if (n != want_n) {
            fail(sub, "%zu elements, want %zu", n, want_n);
            continue;
        }
        if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE) {
            fail(sub, "repeated field type %d not handled by this test", (int)f->type);
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            char el[600];
            snprintf(el, sizeof(el), "%s[%zu]", sub, k);
            compare_value(f, array + k * sizeof(void *), json_array_get(w, k), el);
        }
    }
}

/* Every message below m (m included), for hiding their unknown fields. */
static void collect(ProtobufCMessage *m, ProtobufCMessage ***all, size_t *n)
{
    *all = xreallocarray(*all, *n + 1, sizeof(**all));
    (*all)[(*n)++] = m;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        char *member = (char *)m + f->offset;
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            if (*(ProtobufCMessage **)member)
                collect(*(ProtobufCMessage **)member, all, n);
            continue;
        }
        size_t k = *(size_t *)((char *)m + f->quantifier_offset);
        for (size_t j = 0; j < k; j++)
            collect((*(ProtobufCMessage ***)member)[j], all, n);
    }
}

/* The bytes a 1.34 encoder writes for m: m packed with its unknown fields hidden, and
 * the later fields our schema knows (strings) left out. Returns how many later fields
 * there were (unknown, or known and set). */
static unsigned pack_known(ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    _cleanup_free_ ProtobufCMessage **all = NULL;
    size_t n = 0;
    unsigned unknown = 0;
    collect(m, &all, &n);
    _cleanup_free_ unsigned *saved = xcalloc(n, sizeof(*saved));
    _cleanup_free_ char ***strs = xcalloc(n * 8 + 1, sizeof(*strs));
    _cleanup_free_ char **vals = xcalloc(n * 8 + 1, sizeof(*vals));
    size_t n_strs = 0;
    for (size_t i = 0; i < n; i++) {
        saved[i] = all[i]->n_unknown_fields;
        unknown += saved[i];
        all[i]->n_unknown_fields = 0;
        const ProtobufCMessageDescriptor *d = all[i]->descriptor;
        for (unsigned k = 0; k < d->n_fields && n_strs < n * 8; k++) {
            const ProtobufCFieldDescriptor *f = &d->fields[k];
            char **member = (char **)((char *)all[i] + f->offset);
            if (f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED ||
                !is_later_known(d, f) || !*member)
                continue;
            unknown += **member != 0; /* "" is not sent: no presence in proto3 here */
            strs[n_strs] = member;
            vals[n_strs++] = *member;
            *member = NULL;
        }
    }
    *len = protobuf_c_message_get_packed_size(m);
    *out = xmalloc(*len + 1);
    protobuf_c_message_pack(m, *out);
    for (size_t i = 0; i < n; i++)
        all[i]->n_unknown_fields = saved[i];
    for (size_t i = 0; i < n_strs; i++)
        *strs[i] = vals[i];
    return unknown;
}

static bool is_later_api(json_t *entry)
{
    const char *api = json_string_value(json_object_get(entry, "api")) ?: "";
    return strstr(api, "v0.36") != NULL;
}

/* The 1.34 vector of the same message a later-API vector extends ("Same content as
 * <file> plus ..."): the manifest names it in the comment; the health one says "Same
 * three devices", so fall back to the 1.34 file of that message with the most bytes. */
static const char *twin_of(json_t *files, json_t *entry)
{
    const char *type = json_string_value(json_object_get(entry, "message"));
    const char *comment = json_string_value(json_object_get(entry, "comment")) ?: "";
    const char *best = NULL;
    json_int_t best_size = -1;
    size_t i;
    json_t *e;
    json_array_foreach(files, i, e) {
        const char *f = json_string_value(json_object_get(e, "file"));
        if (is_later_api(e) || !streq(json_string_value(json_object_get(e, "message")), type))
            continue;
        if (strstr(comment, f))
            return f;
        json_int_t sz = json_integer_value(json_object_get(e, "size"));
        if (sz > best_size) {
            best = f;
            best_size = sz;
        }
    }
    return best;
}

static void check_vector(const char *dir, json_t *files, json_t *entry)
{
    const char *file = json_string_value(json_object_get(entry, "file"));
    const char *type = json_string_value(json_object_get(entry, "message"));
    json_t *content = json_object_get(entry, "content");
    _cleanup_free_ char *path = NULL;
    _cleanup_free_ uint8_t *buf = NULL, *again = NULL, *known = NULL;
    size_t len = 0, known_len = 0;
    int failures_before = failures;

    if (!file || !type || !content) {
        fail("manifest", "entry without file/message/content");
        return;
    }
    const ProtobufCMessageDescriptor *d = find_message(type);
    if (!d) {
        fail(file, "message type %s unknown to this test", type);
        return;
    }
    path = xasprintf("%s/%s", dir, file);
    fixture_check(path);
    if (read_file_bounded(path, 1u << 20, (char **)&buf, &len, NULL) < 0) {
        fail(file, "cannot read %s", path);
        return;
    }
    json_t *size = json_object_get(entry, "size");
    if (!json_is_integer(size) || (json_int_t)len != json_integer_value(size))
        fail(file, "%zu bytes, manifest says %" JSON_INTEGER_FORMAT, len, json_integer_value(size));

    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, buf);
    if (!m) {
        fail(file, "protobuf-c cannot decode it as %s", type);
        return;
    }
    compare_message(m, content, file);

    /* Round trip: the same bytes, unknown fields included (they are last in every
     * message that has them, and protobuf-c writes them last). */
    size_t n = protobuf_c_message_get_packed_size(m);
    again = xmalloc(n + 1);
    if (protobuf_c_message_pack(m, again) != n)
        fail(file, "pack wrote a different size than get_packed_size");
    /* except a later optional string set to "": Go writes it (explicit presence), our
     * proto3 field has none and leaves it out; a reader gets "" either way */
    if ((n != len || memcmp(again, buf, len) != 0) && !is_later_api(entry))
        fail(file, "re-encoding gives %zu different bytes (original %zu)", n, len);
    if (is_later_api(entry)) {
        ProtobufCMessage *m2 = protobuf_c_message_unpack(d, NULL, n, again);
        if (!m2)
            fail(file, "our re-encoding does not decode");
        else
            compare_message(m2, content, file);
        if (m2)
            protobuf_c_message_free_unpacked(m2, NULL);
    }

    unsigned unknown = pack_known(m, &known, &known_len);
    if (!is_later_api(entry)) {
        if (unknown)
            fail(file, "%u unknown fields in a 1.34 vector", unknown);
    } else {
        /* What a 1.34 kubelet reads: the later fields skipped, the rest equal to the
         * 1.34 vector of the same content. */
        const char *twin = twin_of(files, entry);
        _cleanup_free_ char *tpath = twin ? xasprintf("%s/%s", dir, twin) : NULL;
        _cleanup_free_ char *tbuf = NULL;
        size_t tlen = 0;
        if (unknown == 0)
            fail(file, "a later-API vector without a later field");
        if (!tpath || read_file_bounded(tpath, 1u << 20, &tbuf, &tlen, NULL) < 0)
            fail(file, "no 1.34 twin to compare with");
        else if (tlen != known_len || memcmp(tbuf, known, tlen) != 0)
            fail(file, "without its %u unknown fields it is not %s", unknown, twin);
        else
            printf("ok %s minus %u later fields == %s\n", file, unknown, twin);
    }
    protobuf_c_message_free_unpacked(m, NULL);

    if (failures == failures_before)
        printf("ok %s (%s, %zu bytes)\n", file, type, len);
}

/* The manifest says a map value may be missing entirely (other encoders leave an empty
 * one out): such an entry must decode as an empty message. */
static void check_missing_map_value(void)
{
    /* claims { key: "u" } with no value field */
    static const uint8_t wire[] = { 0x0a, 0x03, 0x0a, 0x01, 'u' };
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r =
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__unpack(
            NULL, sizeof(wire), wire);
    if (!r || r->n_claims != 1 || !streq(r->claims[0]->key, "u"))
        fail("missing-map-value", "entry without value does not decode");
    else if (r->claims[0]->value)
        fail("missing-map-value", "value unexpectedly present");
    else
        printf("ok map entry without a value decodes (value NULL = empty message)\n");
    if (r)
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r, NULL);
}

int main(void)
{
    _cleanup_free_ char *dir = fixture_path("GDP_TEST_DATA", "dra/wire");
    _cleanup_free_ char *manifest_path = xasprintf("%s/manifest.json", dir);
    json_error_t jerr;

    fixture_check(manifest_path);
    json_t *manifest = json_load_file(manifest_path, 0, &jerr);
    if (!manifest) {
        fprintf(stderr, "FAIL %s:%d: %s\n", manifest_path, jerr.line, jerr.text);
        return 1;
    }
    schema = json_object_get(manifest, "schema");
    json_t *files = json_object_get(manifest, "files");
    if (!json_is_array(files) || json_array_size(files) == 0 || !json_is_object(schema)) {
        fprintf(stderr, "FAIL manifest has no files or no schema\n");
        return 1;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(files, i, entry)
        check_vector(dir, files, entry);

    /* Every .bin on disk must be described by the manifest, so none goes untested. */
    DIR *dh = opendir(dir);
    struct dirent *de;
    if (!dh) {
        fail(dir, "cannot open: %m");
    } else {
        while ((de = readdir(dh))) {
            size_t l = strlen(de->d_name);
            if (l < 4 || !streq(de->d_name + l - 4, ".bin"))
                continue;
            bool found = false;
            json_array_foreach(files, i, entry)
                if (streq(json_string_value(json_object_get(entry, "file")) ?: "", de->d_name))
                    found = true;
            if (!found)
                fail(de->d_name, "not in manifest.json");
        }
        closedir(dh);
    }
    check_missing_map_value();

    size_t n_files = json_array_size(files);
    json_decref(manifest);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("all %zu DRA vectors match\n", n_files);
    return 0;
}
