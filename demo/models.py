"""The demo shop's data, and the tables that count the demo tools' side effects."""

from __future__ import annotations

from django.db import models


class Customer(models.Model):
    """A shop customer; campaigns go to the ones who opted in."""

    email = models.EmailField(primary_key=True)
    name = models.CharField(max_length=100)
    city = models.CharField(max_length=100, blank=True)
    vip = models.BooleanField(default=False)
    marketing_opt_in = models.BooleanField(default=True)

    def __str__(self) -> str:
        return self.name


class Order(models.Model):
    id = models.CharField(primary_key=True, max_length=20)
    customer_email = models.EmailField()
    total = models.DecimalField(max_digits=10, decimal_places=2)
    status = models.CharField(max_length=20, default="delivered")

    def __str__(self) -> str:
        return self.id


class Refund(models.Model):
    """Written by ``issue_refund`` inside the transaction that records its result."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="refunds")
    amount = models.DecimalField(max_digits=10, decimal_places=2)
    reason = models.CharField(max_length=200, blank=True)
    tool_call_id = models.CharField(max_length=40, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.amount} for {self.order_id}"


class Campaign(models.Model):
    id = models.CharField(primary_key=True, max_length=40)
    subject = models.CharField(max_length=200)
    audience_size = models.PositiveIntegerField()

    def __str__(self) -> str:
        return self.subject


class MailerSend(models.Model):
    """The fake mailer's own log: what an external provider would remember, keyed by its
    idempotency key, which it takes once (a second send with it is the first one's answer)."""

    campaign_id = models.CharField(max_length=40)
    idempotency_key = models.CharField(max_length=80, unique=True)
    recipients = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.campaign_id} ({self.idempotency_key})"


class CachePurge(models.Model):
    """One purge the fake CDN performed."""

    path = models.CharField(max_length=200)
    tool_call_id = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.path


class FollowUp(models.Model):
    """A follow-up email the shop will send to an order's customer: written by the independent
    ``schedule_follow_up`` proposal inside the transaction that records its result."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="follow_ups")
    send_on = models.DateField()
    note = models.CharField(max_length=200, blank=True)
    tool_call_id = models.CharField(max_length=40, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"follow-up on {self.order_id}, {self.send_on}"
