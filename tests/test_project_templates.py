"""The demo project's own templates (templates/): the landing page, error pages, and its
override of the console's base template."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_landing_page_links_the_console_the_api_docs_and_the_walkthrough(client: Client):
    page = client.get("/").content.decode()
    for link in ('href="/console/inbox/"', 'href="/agent/docs/"', 'href="#walkthrough"'):
        assert link in page
    assert 'id="walkthrough"' in page


def test_an_unknown_address_gets_the_project_s_404_page(client: Client):
    response = client.get("/no/such/page/")
    assert response.status_code == 404 and b"Nothing lives at this address" in response.content


def test_the_project_overrides_the_console_s_base_template(client: Client):
    client.force_login(User.objects.create_user("root", is_staff=True))
    page = client.get("/console/inbox/").content.decode()
    assert "Airlock <span>demo console</span>" in page  # the project's blocks
    assert "The operators' console of the Airlock demo shop" in page
    assert "Skip to content" in page  # the console's own base template around it
