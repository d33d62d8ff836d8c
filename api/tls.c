/* HTTPS: libmicrohttpd's GnuTLS transport, TLS 1.2 and 1.3 only, with a certificate and key
 * that can be re-read without dropping the listener (SIGHUP -> api_tls_reload).
 *
 * MHD asks for the certificate on every handshake (MHD_OPTION_HTTPS_CERT_CALLBACK2). The
 * callback hands GnuTLS its own copy of the current pair, to be freed with the session
 * (GNUTLS_CERT_RETR_DEINIT_ALL), so a reload can drop the old pair at once while older
 * sessions keep what they were given. GnuTLS's callback has no user pointer: the pair lives in
 * a process-wide slot, and one api at a time may serve TLS. */
#include "api/api_conns.h"
#include "api/api_daemon.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TLS 1.2 and 1.3, GnuTLS's NORMAL ciphers for them. */
#define API_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define API_TLS_FILE_MAX (1u << 20)
#define API_TLS_CHAIN_MAX 16 /* certificates in the chain file */

/* A certificate chain and its key, as read (PEM), checked to belong together. */
struct tls_pair {
	gnutls_datum_t cert, key; /* owned (gnutls_free) */
	int64_t not_after;        /* the leaf's expiry, seconds since the epoch */
};

static pthread_mutex_t tls_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tls_pair *tls_now;   /* guarded by tls_mu */
static const struct api *tls_user; /* the api serving TLS; guarded by tls_mu */

static void pair_free(struct tls_pair *p)
{
	if (!p)
		return;
	gnutls_free(p->cert.data);
	if (p->key.data)
		gnutls_memset(p->key.data, 0, p->key.size);
	gnutls_free(p->key.data);
	free(p);
}

/* Reads a whole file into *out (gnutls_free); false with err filled. */
static bool file_read(const char *what, const char *path, gnutls_datum_t *out, char *err,
		      size_t errlen)
{
	int rc = gnutls_load_file(path, out);

	if (rc < 0) {
		snprintf(err, errlen, "%s %s: cannot read it: %s", what, path, gnutls_strerror(rc));
		return false;
	}
	if (out->size == 0 || out->size > API_TLS_FILE_MAX) {
		snprintf(err, errlen, "%s %s: %s", what, path, out->size ? "too large" : "empty");
		gnutls_free(out->data);
		out->data = NULL;
		return false;
	}
	return true;
}

/* Loads and checks a pair: both parse (PEM), and the key is the certificate's (GnuTLS checks
 * that when the pair joins a credentials set). *out NULL on failure, err says why. */
static enum core_rc pair_load(const char *cert_path, const char *key_path,
			      struct tls_pair **out, char *err, size_t errlen)
{
	struct tls_pair *p = calloc(1, sizeof(*p));
	gnutls_certificate_credentials_t cred = NULL;
	gnutls_x509_crt_t crt = NULL;
	int rc;

	*out = NULL;
	if (!p)
		return CORE_ERR_NOMEM;
	if (!file_read("certificate", cert_path, &p->cert, err, errlen) ||
	    !file_read("key", key_path, &p->key, err, errlen))
		goto fail;
	if (gnutls_certificate_allocate_credentials(&cred) < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	rc = gnutls_certificate_set_x509_key_mem2(cred, &p->cert, &p->key, GNUTLS_X509_FMT_PEM,
						  NULL, 0);
	if (rc < 0) {
		snprintf(err, errlen, "certificate %s with key %s: %s", cert_path, key_path,
			 gnutls_strerror(rc));
		goto fail;
	}
	/* What each handshake will do with it (api_tls_cert_callback), done once here. */
	{
		gnutls_pcert_st list[API_TLS_CHAIN_MAX];
		unsigned n = API_TLS_CHAIN_MAX, i;

		rc = gnutls_pcert_list_import_x509_raw(list, &n, &p->cert, GNUTLS_X509_FMT_PEM, 0);
		if (rc < 0) {
			snprintf(err, errlen, "certificate %s: %s (at most %d certificates)",
				 cert_path, gnutls_strerror(rc), API_TLS_CHAIN_MAX);
			goto fail;
		}
		for (i = 0; i < n; i++)
			gnutls_pcert_deinit(&list[i]);
	}
	if (gnutls_x509_crt_init(&crt) < 0 ||
	    gnutls_x509_crt_import(crt, &p->cert, GNUTLS_X509_FMT_PEM) < 0) {
		snprintf(err, errlen, "certificate %s: no PEM certificate", cert_path);
		goto fail;
	}
	p->not_after = (int64_t)gnutls_x509_crt_get_expiration_time(crt);
	gnutls_x509_crt_deinit(crt);
	gnutls_certificate_free_credentials(cred);
	*out = p;
	return CORE_OK;
fail:
	if (crt)
		gnutls_x509_crt_deinit(crt);
	if (cred)
		gnutls_certificate_free_credentials(cred);
	pair_free(p);
	return CORE_ERR_BAD_REQUEST;
}

/* GnuTLS, on each handshake: a fresh copy of the current pair, which the session frees. */
int api_tls_cert_callback(gnutls_session_t session, const struct gnutls_cert_retr_st *info,
			  gnutls_pcert_st **certs, unsigned int *certs_length,
			  gnutls_ocsp_data_st **ocsp, unsigned int *ocsp_length,
			  gnutls_privkey_t *privkey, unsigned int *flags)
{
	gnutls_pcert_st *list = NULL;
	gnutls_privkey_t key = NULL;
	unsigned n = API_TLS_CHAIN_MAX, i;
	int rc = -1;

	*certs = NULL;
	*certs_length = 0;
	*ocsp = NULL;
	*ocsp_length = 0;
	*privkey = NULL;
	*flags = 0;
	list = gnutls_malloc(n * sizeof(*list));
	if (!list || gnutls_privkey_init(&key) < 0)
		goto out;
	pthread_mutex_lock(&tls_mu);
	if (tls_now &&
	    gnutls_pcert_list_import_x509_raw(list, &n, &tls_now->cert, GNUTLS_X509_FMT_PEM, 0) >=
		    0) {
		if (gnutls_privkey_import_x509_raw(key, &tls_now->key, GNUTLS_X509_FMT_PEM, NULL,
						   0) >= 0)
			rc = 0;
		else
			for (i = 0; i < n; i++)
				gnutls_pcert_deinit(&list[i]);
	}
	pthread_mutex_unlock(&tls_mu);
out:
	if (rc < 0) {
		gnutls_free(list);
		if (key)
			gnutls_privkey_deinit(key);
		return -1; /* the handshake fails; the listener stays */
	}
	*certs = list;
	*certs_length = n;
	*privkey = key;
	*flags = GNUTLS_CERT_RETR_DEINIT_ALL;
	return 0;
}

enum core_rc api_tls_setup(struct api *a, char *err, size_t errlen)
{
	struct tls_pair *p = NULL;
	enum core_rc rc;

	if (!a->cfg.tls_cert && !a->cfg.tls_key)
		return CORE_OK;
	if (!a->cfg.tls_cert || !a->cfg.tls_key) {
		snprintf(err, errlen, "TLS needs both a certificate (--tls-cert) and a key "
				      "(--tls-key)");
		return CORE_ERR_BAD_REQUEST;
	}
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
	    MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK2) != MHD_YES) {
		snprintf(err, errlen, "this libmicrohttpd was built without TLS (GnuTLS) or "
				      "without the certificate callback");
		return CORE_ERR_BAD_REQUEST;
	}
	rc = pair_load(a->cfg.tls_cert, a->cfg.tls_key, &p, err, errlen);
	if (rc != CORE_OK)
		return rc;
	pthread_mutex_lock(&tls_mu);
	if (tls_user) {
		pthread_mutex_unlock(&tls_mu);
		pair_free(p);
		snprintf(err, errlen, "another server in this process already serves TLS");
		return CORE_ERR_BAD_REQUEST;
	}
	tls_user = a;
	tls_now = p;
	pthread_mutex_unlock(&tls_mu);
	a->tls = true;
	return CORE_OK;
}

void api_tls_release(struct api *a)
{
	if (!a->tls)
		return;
	pthread_mutex_lock(&tls_mu);
	pair_free(tls_now);
	tls_now = NULL;
	tls_user = NULL;
	pthread_mutex_unlock(&tls_mu);
	a->tls = false;
}

const char *api_tls_priorities(void)
{
	return API_TLS_PRIORITIES;
}

enum core_rc api_tls_reload(struct api *a, char *err, size_t errlen)
{
	struct tls_pair *p = NULL, *old;
	enum core_rc rc;

	if (!a || !a->tls) {
		snprintf(err, errlen, "TLS is off");
		return CORE_ERR_BAD_REQUEST;
	}
	rc = pair_load(a->cfg.tls_cert, a->cfg.tls_key, &p, err, errlen);
	metrics_inc(a->metrics, METRICS_TLS_RELOADS, rc == CORE_OK ? "ok" : "error");
	if (rc != CORE_OK)
		return rc; /* the pair in use stays */
	pthread_mutex_lock(&tls_mu);
	old = tls_now;
	tls_now = p;
	pthread_mutex_unlock(&tls_mu);
	pair_free(old); /* sessions hold their own copies */
	return CORE_OK;
}

void api_tls_collect(const struct api *a, struct metrics_sink *s)
{
	int64_t not_after = 0;

	if (!a->tls)
		return;
	pthread_mutex_lock(&tls_mu);
	if (tls_now)
		not_after = tls_now->not_after;
	pthread_mutex_unlock(&tls_mu);
	metrics_sink_value(s, METRICS_TLS_NOT_AFTER, NULL, (double)not_after);
}
