"""Notifications: approvers told of a waiting call through pluggable channels (email, webhooks)."""
