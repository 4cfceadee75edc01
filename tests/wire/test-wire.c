/* Wire-vector test: decodes every known-good encoding in
 * $GDP_TEST_DATA/deviceplugin-wire/ with our protobuf-c code and compares it,
 * field by field, with the manifest's `content`.
 *
 * The comparison walks the protobuf-c descriptors rather than naming each struct
 * member, so every field of every message in the vectors is checked (including the
 * ones holding defaults) and a field added to api.proto later is covered too.
 * Conventions from the manifest: maps are unordered sets, defaults are absent on the
 * wire, `null` is an unset message, and the v0.19 name `devicesIDs` is our
 * `devices_ids`. Each message is then re-encoded and must give back the same bytes
 * (protobuf-c and gogo both write fields in number order, and the map entries in the
 * vectors are sorted) and the same content. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.pb-c.h"
#include "core/macro.h"
#include "tests/common/fixture.h"

static int failures;

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
    &v1beta1__device_plugin_options__descriptor,
    &v1beta1__register_request__descriptor,
    &v1beta1__empty__descriptor,
    &v1beta1__list_and_watch_response__descriptor,
    &v1beta1__pre_start_container_request__descriptor,
    &v1beta1__pre_start_container_response__descriptor,
    &v1beta1__preferred_allocation_request__descriptor,
    &v1beta1__preferred_allocation_response__descriptor,
    &v1beta1__allocate_request__descriptor,
    &v1beta1__allocate_response__descriptor,
};

static const ProtobufCMessageDescriptor *find_message(const char *full_name)
{
    for (size_t i = 0; i < ELEMENTSOF(messages); i++)
        if (streq(messages[i]->name, full_name))
            return messages[i];
    return NULL;
}

/* The manifest uses the v0.19.1 field names; the two renamed ones map here. */
static json_t *content_field(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);

    if (!v && streq(name, "devices_ids"))
        v = json_object_get(obj, "devicesIDs");
    return v;
}

static bool is_known_key(const ProtobufCMessageDescriptor *d, const char *key)
{
    if (streq(key, "devicesIDs"))
        key = "devices_ids";
    return protobuf_c_message_descriptor_get_field_by_name(d, key) != NULL;
}

static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
    return d->n_fields == 2 && streq(d->fields[0].name, "key") &&
           streq(d->fields[1].name, "value") && d->fields[0].type == PROTOBUF_C_TYPE_STRING &&
           d->fields[1].type == PROTOBUF_C_TYPE_STRING;
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
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_INT64: {
        int64_t v = f->type == PROTOBUF_C_TYPE_INT32 ? *(const int32_t *)member
                                                     : *(const int64_t *)member;
        if (want && !json_is_integer(want))
            fail(path, "content is not an integer");
        else if (v != (want ? json_integer_value(want) : 0))
            fail(path, "got %" PRId64 ", want %" JSON_INTEGER_FORMAT, v,
                 want ? json_integer_value(want) : 0);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)member;
        if (!want || json_is_null(want)) {
            if (sub)
                fail(path, "message set, want unset");
        } else if (!sub) {
            /* e.g. a NUMANode with ID 0 is an empty message, but it is there. */
            fail(path, "message unset, want %s", json_is_object(want) ? "an object" : "?");
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
static void compare_map(size_t n, ProtobufCMessage *const *entries,
                        json_t *want, const char *path)
{
    if (want && !json_is_object(want)) {
        fail(path, "content is not an object");
        return;
    }
    if (n != (want ? json_object_size(want) : 0))
        fail(path, "%zu entries, want %zu", n, want ? json_object_size(want) : 0);
    for (size_t i = 0; i < n; i++) {
        const ProtobufCMessageDescriptor *ed = entries[i]->descriptor;
        const char *key = *(char *const *)((const char *)entries[i] + ed->fields[0].offset);
        const char *val = *(char *const *)((const char *)entries[i] + ed->fields[1].offset);
        json_t *w = want ? json_object_get(want, key) : NULL;

        if (!w)
            fail(path, "unexpected key \"%s\"", key);
        else if (!json_is_string(w) || !streq(json_string_value(w), val))
            fail(path, "key \"%s\": got \"%s\"", key, val);
        for (size_t j = 0; j < i; j++) {
            const char *other = *(char *const *)((const char *)entries[j] + ed->fields[0].offset);
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
    /* Every key of content must be a field we know, or we would silently skip it. */
    json_object_foreach(want, key, v)
        if (!is_known_key(d, key))
            fail(path, "content has field \"%s\" that %s does not have", key, d->name);

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *member = (const char *)m + f->offset;
        json_t *w = content_field(want, f->name);

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
        size_t elem = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE
                              ? sizeof(void *)
                      : f->type == PROTOBUF_C_TYPE_INT64 ? sizeof(int64_t)
                      : f->type == PROTOBUF_C_TYPE_BOOL  ? sizeof(protobuf_c_boolean)
                                                         : sizeof(int32_t);
        for (size_t k = 0; k < n; k++) {
            char el[600];
            snprintf(el, sizeof(el), "%s[%zu]", sub, k);
            compare_value(f, array + k * elem, json_array_get(w, k), el);
        }
    }
}

static uint8_t *read_all(const char *path, size_t *len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;

    if (fd < 0 || fstat(fd, &st) < 0)
        return NULL;
    uint8_t *buf = xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = RETRY_EINTR(read(fd, buf + got, (size_t)st.st_size - got));
        if (r <= 0) {
            free(buf);
            return NULL;
        }
        got += (size_t)r;
    }
    *len = got;
    return buf;
}

static int count_top_level_fields(const uint8_t *buf, size_t len)
{
    /* Decoded as Empty, every top-level field of any vector is unknown and must be
     * skipped, not fail the decode. */
    V1beta1__Empty *e = v1beta1__empty__unpack(NULL, len, buf);
    if (!e)
        return -1;
    int n = (int)e->base.n_unknown_fields;
    v1beta1__empty__free_unpacked(e, NULL);
    return n;
}

static void check_vector(const char *dir, json_t *entry)
{
    const char *file = json_string_value(json_object_get(entry, "file"));
    const char *type = json_string_value(json_object_get(entry, "message"));
    json_t *content = json_object_get(entry, "content");
    _cleanup_free_ char *path = NULL;
    _cleanup_free_ uint8_t *buf = NULL;
    _cleanup_free_ uint8_t *again = NULL;
    size_t len = 0;
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
    buf = read_all(path, &len);
    if (!buf) {
        fail(file, "cannot read %s: %m", path);
        return;
    }
    json_t *size = json_object_get(entry, "size");
    if (json_is_integer(size) && (json_int_t)len != json_integer_value(size))
        fail(file, "%zu bytes, manifest says %" JSON_INTEGER_FORMAT, len, json_integer_value(size));

    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, buf);
    if (!m) {
        fail(file, "protobuf-c cannot decode it as %s", type);
        return;
    }
    if (m->n_unknown_fields)
        fail(file, "%u unknown fields when decoding as %s", m->n_unknown_fields, type);
    compare_message(m, content, file);

    /* Round trip: same bytes, and the same content once decoded again. */
    size_t n = protobuf_c_message_get_packed_size(m);
    again = xmalloc(n + 1);
    if (protobuf_c_message_pack(m, again) != n)
        fail(file, "pack wrote a different size than get_packed_size");
    if (n != len || memcmp(again, buf, len) != 0)
        fail(file, "re-encoding gives %zu different bytes (original %zu)", n, len);
    ProtobufCMessage *m2 = protobuf_c_message_unpack(d, NULL, n, again);
    if (!m2) {
        fail(file, "re-encoded message does not decode");
    } else {
        char where[300];
        snprintf(where, sizeof(where), "%s(re-encoded)", file);
        compare_message(m2, content, where);
        protobuf_c_message_free_unpacked(m2, NULL);
    }
    protobuf_c_message_free_unpacked(m, NULL);

    int unknown = count_top_level_fields(buf, len);
    if (unknown < 0)
        fail(file, "decoding as Empty (all fields unknown) failed");
    else if ((len == 0) != (unknown == 0))
        fail(file, "decoding as Empty kept %d unknown fields for %zu bytes", unknown, len);

    if (failures == failures_before)
        printf("ok %s (%s, %zu bytes)\n", file, type, len);
}

/* AllocateResponse.bin carries field 5 (cdi_devices) and the _nocdi file does not;
 * read with a schema that lacks field 5 they must be the same. We have no such schema,
 * so check the equivalent: dropping cdi_devices from the first gives the second. */
static void check_cdi_equivalence(const char *dir)
{
    _cleanup_free_ char *p1 = xasprintf("%s/AllocateResponse.bin", dir);
    _cleanup_free_ char *p2 = xasprintf("%s/AllocateResponse_nocdi.bin", dir);
    _cleanup_free_ uint8_t *b1 = NULL, *b2 = NULL, *packed = NULL;
    size_t l1 = 0, l2 = 0;

    b1 = read_all(p1, &l1);
    b2 = read_all(p2, &l2);
    if (!b1 || !b2) {
        fail("cdi-equivalence", "missing AllocateResponse vectors");
        return;
    }
    V1beta1__AllocateResponse *r = v1beta1__allocate_response__unpack(NULL, l1, b1);
    if (!r) {
        fail("cdi-equivalence", "AllocateResponse.bin does not decode");
        return;
    }
    size_t saved[16] = { 0 };
    if (r->n_container_responses > ELEMENTSOF(saved)) {
        fail("cdi-equivalence", "too many containers for this check");
        v1beta1__allocate_response__free_unpacked(r, NULL);
        return;
    }
    for (size_t i = 0; i < r->n_container_responses; i++) {
        saved[i] = r->container_responses[i]->n_cdi_devices;
        r->container_responses[i]->n_cdi_devices = 0;
    }
    size_t n = v1beta1__allocate_response__get_packed_size(r);
    packed = xmalloc(n + 1);
    v1beta1__allocate_response__pack(r, packed);
    if (n != l2 || memcmp(packed, b2, n) != 0)
        fail("cdi-equivalence", "AllocateResponse without cdi_devices != AllocateResponse_nocdi");
    else
        printf("ok AllocateResponse minus cdi_devices == AllocateResponse_nocdi\n");
    /* free_unpacked frees the cdi_devices entries by count: put the counts back. */
    for (size_t i = 0; i < r->n_container_responses; i++)
        r->container_responses[i]->n_cdi_devices = saved[i];
    v1beta1__allocate_response__free_unpacked(r, NULL);
}

int main(void)
{
    _cleanup_free_ char *dir = fixture_path("GDP_TEST_DATA", "deviceplugin-wire");
    _cleanup_free_ char *manifest_path = xasprintf("%s/manifest.json", dir);
    json_error_t jerr;

    fixture_check(manifest_path);
    json_t *manifest = json_load_file(manifest_path, 0, &jerr);
    if (!manifest) {
        fprintf(stderr, "FAIL %s:%d: %s\n", manifest_path, jerr.line, jerr.text);
        return 1;
    }
    json_t *files = json_object_get(manifest, "files");
    if (!json_is_array(files) || json_array_size(files) == 0) {
        fprintf(stderr, "FAIL manifest has no files\n");
        return 1;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(files, i, entry)
        check_vector(dir, entry);

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
    check_cdi_equivalence(dir);

    size_t n_files = json_array_size(files);
    json_decref(manifest);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("all %zu vectors match\n", n_files);
    return 0;
}
