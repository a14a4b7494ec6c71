/* xenoflow-check-backends FILE: validate a backends file with XenoFlow's parser and print the
 * slot table as JSON; exit 2 with the error on stderr. Used by the tests against the shared
 * vectors (tests/vectors/backends/cases.yaml). */
#include <stdio.h>

#include "backends.h"

int main(int argc, char **argv)
{
	static struct xf_backends bs;
	char err[1024];

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
	for (int i = 0; i < bs.n; i++)
		printf("%s{\"name\": \"%s\", \"mac\": \"%s\", \"weight\": %d}", i ? ", " : "", bs.b[i].name,
		       bs.b[i].mac_str, bs.b[i].weight);
	printf("]}\n");
	xf_backends_free(&bs);
	return 0;
}
