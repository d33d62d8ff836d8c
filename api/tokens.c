/* Bearer tokens (DESIGN §8, §10): the tokens file (load, save, generate), SHA-256 digests
 * compared in constant time, the names of roles and capabilities, board scopes; and the set a
 * running server serves, replaced whole on SIGHUP (api_tokens_replace) with every set kept
 * until api_stop (requests hold pointers into the one they loaded). Plain tokens are never
 * stored. A request's own authentication is auth.c's. */
#include "api/api_auth.h"
#include "api/api_daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* The names of the role and capability bits, as the tokens file spells them. */
struct name_bit {
	const char *name;
	unsigned bit;
};

static const struct name_bit role_names[] = {
	{"worker", API_ROLE_WORKER},
	{"bot", API_ROLE_BOT},
	{"operator", API_ROLE_OPERATOR},
};

static const struct name_bit cap_names[] = {
#define API_CAP_ROW(id, bit, name) {name, id},
	API_CAPS(API_CAP_ROW)
#undef API_CAP_ROW
};

#define NAME_BITS(t) (t), sizeof(t) / sizeof((t)[0])

/* The bit named s in t[0, n); 0 for none (and for NULL). */
static unsigned name_bit_parse(const struct name_bit *t, size_t n, const char *s)
{
	size_t i;

	for (i = 0; s && i < n; i++)
		if (strcmp(s, t[i].name) == 0)
			return t[i].bit;
	return 0;
}

/* A new array of the names in t[0, n) of the bits set in bits. */
static json_t *name_bit_json(const struct name_bit *t, size_t n, unsigned bits)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < n; i++)
		if (bits & t[i].bit)
			json_array_append_new(a, json_string(t[i].name));
	return a;
}

unsigned api_role_parse(const char *s)
{
	return name_bit_parse(NAME_BITS(role_names), s);
}

unsigned api_cap_parse(const char *s)
{
	return name_bit_parse(NAME_BITS(cap_names), s);
}

const char *api_cap_name(unsigned bit)
{
	size_t i;

	for (i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
		if (cap_names[i].bit == bit)
			return cap_names[i].name;
	return NULL;
}

static bool sha256(const void *data, size_t len, unsigned char out[32])
{
	unsigned int n = 0;

	return EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) == 1 && n == 32;
}

static void hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static bool hex_decode32(const char *s, unsigned char out[32])
{
	size_t i;

	if (!s || strlen(s) != 64)
		return false;
	for (i = 0; i < 64; i++) {
		char c = s[i];
		int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;

		if (v < 0)
			return false; /* lower-case hex only (DESIGN §10) */
		if (i % 2 == 0)
			out[i / 2] = (unsigned char)(v << 4);
		else
			out[i / 2] |= (unsigned char)v;
	}
	return true;
}

static void token_release(struct api_token *t)
{
	size_t i;

	free(t->name);
	for (i = 0; i < t->n_boards; i++)
		free(t->boards[i]);
	free(t->boards);
	memset(t, 0, sizeof *t);
}

void api_tokens_release(struct api_tokens *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		token_release(&t->v[i]);
	free(t->v);
	t->v = NULL;
	t->n = 0;
}

/* Fills tok from parts; tok is zeroed. boards NULL or containing "*" means every board. */
static enum core_rc token_fill(struct api_token *tok, const char *name,
			       const unsigned char digest[32], unsigned roles, unsigned caps,
			       const char *const *boards)
{
	size_t n = 0, i;

	tok->name = strdup(name);
	if (!tok->name)
		goto oom;
	memcpy(tok->sha256, digest, 32);
	tok->roles = roles;
	tok->caps = caps;
	tok->all_boards = !boards;
	for (i = 0; boards && boards[i]; i++) {
		if (strcmp(boards[i], "*") == 0)
			tok->all_boards = true;
		n++;
	}
	if (tok->all_boards)
		return CORE_OK;
	tok->boards = calloc(n + 1, sizeof *tok->boards);
	if (!tok->boards)
		goto oom;
	for (i = 0; i < n; i++) {
		tok->boards[i] = strdup(boards[i]);
		if (!tok->boards[i])
			goto oom;
		tok->n_boards = i + 1;
	}
	return CORE_OK;
oom:
	token_release(tok);
	return CORE_ERR_NOMEM;
}

bool api_token_name_valid(const char *name)
{
	const unsigned char *p;

	if (!name || !*name || strlen(name) > API_TOKEN_NAME_MAX)
		return false;
	for (p = (const unsigned char *)name; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == ':' || *p == '/')
			return false;
	return true;
}

static enum core_rc tokens_append(struct api_tokens *t, const char *name,
				  const unsigned char digest[32], unsigned roles, unsigned caps,
				  const char *const *boards)
{
	struct api_token *v = realloc(t->v, (t->n + 1) * sizeof *v);
	enum core_rc rc;

	if (!v)
		return CORE_ERR_NOMEM;
	t->v = v;
	memset(&v[t->n], 0, sizeof v[t->n]);
	rc = token_fill(&v[t->n], name, digest, roles, caps, boards);
	if (rc == CORE_OK)
		t->n++;
	return rc;
}

enum core_rc api_tokens_push_caps(struct api_tokens *t, const char *name, const char *plain,
				  unsigned roles, unsigned caps, const char *const *boards)
{
	unsigned char digest[32];

	if (!t || !api_token_name_valid(name) || !plain || !*plain || !roles ||
	    (caps & ~API_CAP_ALL))
		return CORE_ERR_BAD_REQUEST;
	if (!sha256(plain, strlen(plain), digest))
		return CORE_ERR_INTERNAL;
	return tokens_append(t, name, digest, roles, caps, boards);
}

enum core_rc api_tokens_push(struct api_tokens *t, const char *name, const char *plain,
			     unsigned roles, const char *const *boards)
{
	return api_tokens_push_caps(t, name, plain, roles, API_CAP_ALL, boards);
}

/* Parses one entry of the file into t. */
static enum core_rc entry_parse(const json_t *e, size_t idx, struct api_tokens *t, char *err,
				size_t errlen)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *hex = json_string_value(json_object_get(e, "token_sha256"));
	const json_t *roles = json_object_get(e, "roles");
	const json_t *boards = json_object_get(e, "boards");
	const json_t *caps = json_object_get(e, "caps");
	const char **bv = NULL;
	unsigned char digest[32];
	unsigned bits = 0, capbits = caps ? 0 : API_CAP_ALL;
	enum core_rc rc = CORE_ERR_BAD_REQUEST;
	size_t i;
	const json_t *v;

	if (!json_is_object(e) || !name || !*name) {
		snprintf(err, errlen, "tokens[%zu]: missing \"name\"", idx);
		goto out;
	}
	if (!api_token_name_valid(name)) {
		snprintf(err, errlen, "tokens[%zu]: invalid \"name\" (at most %d bytes, no ':', "
			 "'/' or control character: the reaper and agent tokens use those)", idx,
			 API_TOKEN_NAME_MAX);
		goto out;
	}
	if (!hex_decode32(hex, digest)) {
		snprintf(err, errlen, "token %s: \"token_sha256\" must be 64 lower-case hex digits",
			 name);
		goto out;
	}
	if (!json_is_array(roles) || json_array_size(roles) == 0) {
		snprintf(err, errlen, "token %s: \"roles\" must be a non-empty array", name);
		goto out;
	}
	json_array_foreach(roles, i, v) {
		unsigned bit = api_role_parse(json_string_value(v));

		if (!bit) {
			snprintf(err, errlen, "token %s: unknown role (worker, bot, operator)", name);
			goto out;
		}
		bits |= bit;
	}
	if (caps && !json_is_array(caps)) {
		snprintf(err, errlen, "token %s: \"caps\" must be an array", name);
		goto out;
	}
	json_array_foreach(caps, i, v) {
		unsigned bit = api_cap_parse(json_string_value(v));

		if (!bit) {
			snprintf(err, errlen,
				 "token %s: unknown capability (board.read, board.create, board.move, "
				 "board.label, board.comment, board.close)",
				 name);
			goto out;
		}
		capbits |= bit;
	}
	if (boards && !json_is_array(boards)) {
		snprintf(err, errlen, "token %s: \"boards\" must be an array", name);
		goto out;
	}
	if (boards) {
		bv = calloc(json_array_size(boards) + 1, sizeof *bv);
		if (!bv) {
			rc = CORE_ERR_NOMEM;
			goto out;
		}
		json_array_foreach(boards, i, v) {
			bv[i] = json_string_value(v);
			if (!bv[i] || (strcmp(bv[i], "*") != 0 && !core_name_valid(bv[i]))) {
				snprintf(err, errlen, "token %s: invalid board name", name);
				goto out;
			}
		}
	}
	/* A missing "boards" means every board, like ["*"]; a missing "caps" all six (an empty
	 * list is a token that can do nothing to the board, which is allowed). */
	rc = tokens_append(t, name, digest, bits, capbits, boards ? bv : NULL);
out:
	free(bv);
	return rc;
}

enum core_rc api_tokens_load(const char *path, struct api_tokens *out, char *err, size_t errlen)
{
	struct api_tokens t = {0};
	json_error_t jerr;
	json_t *root = NULL;
	const json_t *list, *e;
	enum core_rc rc = CORE_ERR_BAD_REQUEST;
	size_t i;

	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		snprintf(err, errlen, "%s: %s (line %d)", path, jerr.text, jerr.line);
		rc = errno == ENOENT ? CORE_ERR_NOT_FOUND : CORE_ERR_BAD_REQUEST;
		goto out;
	}
	list = json_object_get(root, "tokens");
	if (!json_is_array(list)) {
		snprintf(err, errlen, "%s: expected {\"tokens\": [...]}", path);
		goto out;
	}
	json_array_foreach(list, i, e) {
		size_t k;

		rc = entry_parse(e, i, &t, err, errlen);
		if (rc != CORE_OK)
			goto out;
		for (k = 0; k + 1 < t.n; k++)
			if (strcmp(t.v[k].name, t.v[t.n - 1].name) == 0) {
				snprintf(err, errlen, "%s: duplicate token name %s", path,
					 t.v[k].name);
				rc = CORE_ERR_BAD_REQUEST;
				goto out;
			}
	}
	*out = t;
	memset(&t, 0, sizeof t);
	rc = CORE_OK;
out:
	api_tokens_release(&t);
	json_decref(root);
	return rc;
}

static json_t *tokens_to_json(const struct api_tokens *t)
{
	json_t *root = json_object(), *list = json_array();
	size_t i, k;

	if (!root || !list || json_object_set(root, "tokens", list) != 0)
		goto fail;
	for (i = 0; i < t->n; i++) {
		const struct api_token *tok = &t->v[i];
		json_t *roles = name_bit_json(NAME_BITS(role_names), tok->roles);
		json_t *boards = json_array();
		char hex[65];

		hex_encode(tok->sha256, 32, hex);
		if (tok->all_boards)
			json_array_append_new(boards, json_string("*"));
		for (k = 0; k < tok->n_boards; k++)
			json_array_append_new(boards, json_string(tok->boards[k]));
		json_t *e = json_pack("{s:s, s:s, s:o, s:o}", "name", tok->name, "token_sha256",
				      hex, "roles", roles, "boards", boards);

		if (e && tok->caps != API_CAP_ALL) {
			json_t *caps = name_bit_json(NAME_BITS(cap_names), tok->caps);

			if (json_object_set_new(e, "caps", caps) != 0) {
				json_decref(e);
				e = NULL;
			}
		}
		if (json_array_append_new(list, e) != 0)
			goto fail;
	}
	json_decref(list);
	return root;
fail:
	json_decref(list);
	json_decref(root);
	return NULL;
}

enum core_rc api_tokens_save(const struct api_tokens *t, const char *path, char *err,
			     size_t errlen)
{
	json_t *j = tokens_to_json(t);
	char *tmp = NULL, *dircopy = NULL;
	enum core_rc rc = CORE_ERR_NOMEM;
	int fd = -1, dfd;

	if (!j)
		goto out;
	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) {
		tmp = NULL;
		goto out;
	}
	rc = CORE_ERR_STORE_UNAVAILABLE;
	fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (fchmod(fd, 0600) != 0 || json_dumpfd(j, fd, JSON_INDENT(2)) != 0 ||
	    write(fd, "\n", 1) != 1 || fsync(fd) != 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	dircopy = strdup(path);
	if (dircopy) {
		dfd = open(dirname(dircopy), O_RDONLY | O_DIRECTORY);
		if (dfd >= 0) {
			(void)fsync(dfd); /* best effort: the rename is already visible */
			close(dfd);
		}
	}
	rc = CORE_OK;
out:
	if (fd >= 0)
		close(fd);
	if (tmp)
		unlink(tmp);
	free(tmp);
	free(dircopy);
	json_decref(j);
	return rc;
}

enum core_rc api_token_generate(char *plain)
{
	unsigned char raw[32];

	if (RAND_bytes(raw, sizeof raw) != 1)
		return CORE_ERR_INTERNAL;
	hex_encode(raw, sizeof raw, plain);
	OPENSSL_cleanse(raw, sizeof raw);
	return CORE_OK;
}

const struct api_token *api_tokens_find(const struct api_tokens *t, const char *plain)
{
	const struct api_token *hit = NULL;
	unsigned char digest[32];
	size_t i;

	if (!t || !plain || !sha256(plain, strlen(plain), digest))
		return NULL;
	/* Every entry is compared, hit or not, so timing tells nothing about which matched. */
	for (i = 0; i < t->n; i++)
		if (CRYPTO_memcmp(digest, t->v[i].sha256, 32) == 0 && !hit)
			hit = &t->v[i];
	return hit;
}

const struct api_token *api_tokens_named(const struct api_tokens *t, const char *name)
{
	size_t i;

	for (i = 0; t && name && i < t->n; i++)
		if (t->v[i].name && strcmp(t->v[i].name, name) == 0)
			return &t->v[i];
	return NULL;
}

bool api_token_board_allowed(const struct api_token *tok, const char *board)
{
	size_t i;

	if (!tok || !board)
		return false;
	if (tok->all_boards)
		return true;
	for (i = 0; i < tok->n_boards; i++)
		if (strcmp(tok->boards[i], board) == 0)
			return true;
	return false;
}

enum core_rc api_tokens_replace(struct api *a, struct api_tokens *fresh)
{
	struct api_tokens *t, **nv;

	t = malloc(sizeof *t);
	if (!t)
		return CORE_ERR_NOMEM;
	pthread_mutex_lock(&a->tokens_mu);
	nv = realloc(a->owned, (a->n_owned + 1) * sizeof *nv);
	if (!nv) {
		pthread_mutex_unlock(&a->tokens_mu);
		free(t);
		return CORE_ERR_NOMEM;
	}
	a->owned = nv;
	*t = *fresh;
	memset(fresh, 0, sizeof *fresh);
	a->owned[a->n_owned++] = t;
	/* The set first, then the generation: a connection that cached a token under the old
	 * generation looks it up again (auth.c). */
	atomic_store(&a->tokens_now, t);
	atomic_fetch_add(&a->tokens_gen, 1);
	pthread_mutex_unlock(&a->tokens_mu);
	return CORE_OK;
}

void api_tokens_free(struct api *a)
{
	size_t i;

	for (i = 0; i < a->n_owned; i++) {
		api_tokens_release(a->owned[i]);
		free(a->owned[i]);
	}
	free(a->owned);
	pthread_mutex_destroy(&a->tokens_mu);
}
