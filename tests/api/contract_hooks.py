"""Schemathesis hooks for tests/api/test_contract.py (loaded through SCHEMATHESIS_HOOKS).

Renew many and finish many (POST /v1/claims/renew, /v1/claims/release, DESIGN §18) refuse a
batch that names one card twice with 400, a rule no JSON Schema can state (uniqueness by a
member of the items): generated bodies that do so are left out, here only. The refusal itself
is tested in tests/api/test_api_many.c.
"""
import schemathesis


@schemathesis.hook('filter_body').apply_to(method='POST', path_regex='^/v1/claims/')
def one_card_once(context, body):
    items = body.get('tokens') if isinstance(body, dict) else None
    if not isinstance(items, list):
        return True
    cards = [i.get('card') for i in items if isinstance(i, dict) and isinstance(i.get('card'), str)]
    return len(cards) == len(set(cards))
