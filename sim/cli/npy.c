/*
 * npy.c -- minimal, strict .npy reader and writer (see npy.h).
 */
#include "npy.h"

#include "neuronsim/isa.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *descr; int dtype; unsigned size; } kinds[] = {
	{ "<f4", ISA_DT_fp32, 4 },  { "<f2", ISA_DT_fp16, 2 },   { "<i4", ISA_DT_int32, 4 },
	{ "<i2", ISA_DT_int16, 2 }, { "|i1", ISA_DT_int8, 1 },   { "|u1", ISA_DT_uint8, 1 },
	{ "<u2", ISA_DT_uint16, 2 },{ "<u4", ISA_DT_uint32, 4 }, { "|b1", ISA_DT_bool, 1 },
};

static int err_out(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int err_out(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
	return -1;
}

const char *npy_descr_of(int dtype)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kinds[i].dtype == dtype)
			return kinds[i].descr;
	return NULL;
}

/* finds 'key': in the header dict and returns a pointer past the colon */
static const char *dict_value(const char *h, const char *key)
{
	char pat[32];
	snprintf(pat, sizeof(pat), "'%s'", key);
	const char *p = strstr(h, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	if (*p != ':')
		return NULL;
	p++;
	while (*p == ' ')
		p++;
	return p;
}

int npy_read(const char *path, npy_array *a, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	FILE *f = fopen(path, "rb");
	if (!f)
		return err_out(err, errlen, "%s: %s", path, strerror(errno));
	unsigned char pre[10];
	char *h = NULL;
	int rc = -1;
	if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
		err_out(err, errlen, "%s: not a .npy file", path);
		goto close_file;
	}
	uint32_t hlen;
	if (pre[6] == 1) {
		hlen = pre[8] | (pre[9] << 8);
	} else if (pre[6] == 2 || pre[6] == 3) {
		unsigned char b[2];
		if (fread(b, 1, 2, f) != 2) {
			err_out(err, errlen, "%s: truncated header", path);
			goto close_file;
		}
		hlen = pre[8] | (pre[9] << 8) | ((uint32_t)b[0] << 16) | ((uint32_t)b[1] << 24);
	} else {
		err_out(err, errlen, "%s: .npy version %u not supported", path, pre[6]);
		goto close_file;
	}
	if (hlen > 65536) {
		err_out(err, errlen, "%s: header of %u bytes", path, hlen);
		goto close_file;
	}
	h = malloc(hlen + 1);
	if (!h || fread(h, 1, hlen, f) != hlen) {
		err_out(err, errlen, "%s: truncated header", path);
		goto free_header;
	}
	h[hlen] = '\0';

	const char *d = dict_value(h, "descr");
	if (!d || *d != '\'') {
		err_out(err, errlen, "%s: no descr in header", path);
		goto free_header;
	}
	d++;
	size_t dl = strcspn(d, "'");
	if (dl == 0 || dl >= sizeof(a->descr)) {
		err_out(err, errlen, "%s: bad descr", path);
		goto free_header;
	}
	memcpy(a->descr, d, dl);
	/* "=" and "<" mean the same on a little-endian host; 1-byte types use "|" */
	if (a->descr[0] == '=')
		a->descr[0] = '<';
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *k = kinds[i].descr;
		if (!strcmp(a->descr, k) || (k[0] == '|' && a->descr[1] && !strcmp(a->descr + 1, k + 1))) {
			a->isa_dtype = kinds[i].dtype;
			a->itemsize = kinds[i].size;
			memcpy(a->descr, k, 4);
		}
	}
	if (!a->isa_dtype) {
		err_out(err, errlen, "%s: dtype '%s' not supported (float32/16, int8-32, uint8-32, bool)",
			path, a->descr);
		goto free_header;
	}
	const char *fo = dict_value(h, "fortran_order");
	if (!fo || strncmp(fo, "False", 5) != 0) {
		err_out(err, errlen, "%s: Fortran-order arrays are not supported", path);
		goto free_header;
	}
	const char *s = dict_value(h, "shape");
	if (!s || *s != '(') {
		err_out(err, errlen, "%s: no shape in header", path);
		goto free_header;
	}
	s++;
	a->count = 1;
	for (;;) {
		while (*s == ' ' || *s == ',')
			s++;
		if (*s == ')')
			break;
		if (!isdigit((unsigned char)*s) || a->rank >= NPY_MAX_RANK) {
			err_out(err, errlen, "%s: bad shape", path);
			goto free_header;
		}
		char *end;
		errno = 0;
		unsigned long long v = strtoull(s, &end, 10);
		if (errno || (v && a->count > UINT64_MAX / v)) {
			err_out(err, errlen, "%s: shape overflows", path);
			goto free_header;
		}
		a->shape[a->rank++] = v;
		a->count *= v;
		s = end;
	}
	uint64_t bytes = a->count * a->itemsize;
	if (a->count > (1ull << 40) / a->itemsize) {
		err_out(err, errlen, "%s: %llu elements is too many", path, (unsigned long long)a->count);
		goto free_header;
	}
	a->data = malloc(bytes ? bytes : 1);
	if (!a->data) {
		err_out(err, errlen, "%s: out of memory for %llu bytes", path, (unsigned long long)bytes);
		goto free_header;
	}
	if (fread(a->data, 1, bytes, f) != bytes || fgetc(f) != EOF) {
		err_out(err, errlen, "%s: data is not %llu bytes", path, (unsigned long long)bytes);
		free(a->data);
		a->data = NULL;
		goto free_header;
	}
	rc = 0;
free_header:
	free(h);
close_file:
	fclose(f);
	return rc;
}

int npy_write(const char *path, const char *descr, unsigned rank, const uint64_t *shape,
	      const void *data, uint64_t bytes, char *err, size_t errlen)
{
	char dict[512];
	int n = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	for (unsigned i = 0; i < rank; i++)
		n += snprintf(dict + n, sizeof(dict) - (size_t)n, "%llu%s", (unsigned long long)shape[i],
			      rank == 1 ? "," : i + 1 < rank ? ", " : "");
	n += snprintf(dict + n, sizeof(dict) - (size_t)n, "), }");
	/* pad so that magic + len + header is a multiple of 64, ending in \n */
	size_t total = 10 + (size_t)n + 1;
	size_t pad = (64 - total % 64) % 64;
	FILE *f = fopen(path, "wb");
	if (!f)
		return err_out(err, errlen, "%s: %s", path, strerror(errno));
	uint16_t hl = (uint16_t)((size_t)n + pad + 1);
	unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff),
				  (unsigned char)(hl >> 8) };
	bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
	for (size_t i = 0; ok && i < pad; i++)
		ok = fputc(' ', f) != EOF;
	ok = ok && fputc('\n', f) != EOF && fwrite(data, 1, bytes, f) == bytes;
	ok = (fclose(f) == 0) && ok;
	return ok ? 0 : err_out(err, errlen, "%s: write error", path);
}

void npy_free(npy_array *a)
{
	free(a->data);
	a->data = NULL;
}
