/* An empty shared object, linked with a SONAME (tests/output/meson.build): the ELF file a
 * driver library is, to the CDI spec's symlink rules. */
int gdp_soname_stub(void);
int gdp_soname_stub(void) { return 0; }
