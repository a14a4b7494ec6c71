/* xenoflow-check-backends FILE: validate a backends file with XenoFlow's parser and print what it
 * read as JSON ({"class_bits", "slots", "backends": [{"name", "mac", "weight"}]}); exit 2 with the
 * error on stderr. The tests compare it with xenobench/backends.py on the shared vectors
 * (tests/vectors/backends/cases.yaml) and on generated files (tests/test_property_backends.py). */
#include <stdio.h>

#include "backends.h"

int main(int argc, char **argv)
{
	static struct xf_backends bs;
	static char err[1 << 16]; /* a path through 32 levels of odd keys fits */

	if (argc != 2) {
		fprintf(stderr, "usage: %s BACKENDS_FILE\n", argv[0]);
		return 1;
	}
	if (xf_backends_load(argv[1], &bs, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	printf("{\"class_bits\": %d, \"slots\": [", bs.class_bits);
	for (int s = 0; s < bs.nslots; s++)
		printf("%s%d", s ? ", " : "", bs.slots[s]);
	printf("], \"backends\": [");
	for (int i = 0; i < bs.n; i++) {
		printf("%s{\"name\": %s, \"mac\": \"%s\", \"weight\": %d}", i ? ", " : "", bs.b[i].name_json,
		       bs.b[i].mac_str, bs.b[i].weight);
	}
	printf("]}\n");
	xf_backends_free(&bs);
	return 0;
}
