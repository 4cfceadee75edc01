/* The `health:` settings as part of struct config (config.h embeds one): durations,
 * Xid classes per rule, the reference plugin's DP_*_HEALTHCHECKS switches. Parsed and
 * validated by config_load() like every other setting (config-health.c); what they
 * mean is policy/health.h, which only reads this struct. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* In increasing severity; policy/health.h says what each costs a device. */
enum health_class {
    HEALTH_IGNORE = 0,
    HEALTH_RECOVER,
    HEALTH_LOST,
    HEALTH_NEVER,
};

/* Where a rule comes from decides how policy/health.c applies it (health_classify):
 * SET rules (file, then environment, then flags) give an Xid its class, the last one
 * winning; the reference's DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS Xids
 * then only decide ignore vs act, with its semantics. */
enum health_rule_kind { HEALTH_RULE_SET = 0, HEALTH_RULE_DP_DISABLE, HEALTH_RULE_DP_ENABLE };

struct health_xid_rule {
    uint64_t xid;
    enum health_class cls;       /* HEALTH_RULE_SET only */
    enum health_rule_kind kind;
};

/* Read-only once loaded, so the event thread and the loop may both read a copy. */
struct health_config {
    bool disabled;                   /* DP_DISABLE_HEALTHCHECKS=all without an enable-all */
    bool enable_all;                 /* DP_ENABLE_HEALTHCHECKS=all: every Xid acts */
    struct health_xid_rule *rules;
    size_t n_rules;
    enum health_class default_class; /* Xids without a rule or a built-in class */
    uint64_t quiet_ms;               /* first quiet period before a probe */
    uint64_t max_quiet_ms;           /* cap of the doubling */
    uint64_t flap_window_ms;         /* failing again this soon after a recovery doubles */
    uint64_t unattributed_probe_ms;  /* probe delay after an event no device can be named for */
    uint64_t wait_timeout_ms;        /* nvml_event_wait timeout while waits work */
    unsigned wait_error_threshold;   /* consecutive failed waits before all go Unhealthy */
    uint64_t wait_backoff_ms;        /* first retry delay after a failed wait */
    uint64_t wait_backoff_max_ms;
};

/* "ignore", "recover", "lost", "never". */
const char *config_health_class_name(enum health_class cls);

/* ---- the reference's DP_*_HEALTHCHECKS item lists */
struct health_xid_set {
    bool all;          /* an item "all" or "xids" (case-insensitive) */
    uint64_t *xids;
    size_t n;
};
/* Comma list; blanks skipped; malformed items skipped and counted in *malformed. */
void config_xid_set_parse(struct health_xid_set *s, const char *value, unsigned *malformed);
void config_xid_set_clear(struct health_xid_set *s);
bool config_xid_set_has(const struct health_xid_set *s, uint64_t xid);
