/* placeholder */
#include "boost_internal.h"
int boost_shards_setup(trainer *T, const gbml_dataset *ds) { (void) ds; return gbml_error(T->env, GBML_EUNSUPPORTED, "x"); }
void boost_shards_free(trainer *T) { (void) T; }
void boost_shards_traffic_json(const trainer *T, gbml_strbuf *m) { (void) T; (void) m; }
