"""Sample invoices for the demo: generated as plain text (as OCR would hand them over) and
parsed back into fields with real parsing code. Pure functions, no I/O."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

VENDORS = ("Acme Scanning Ltd", "Northwind Paper Co", "Globex Imaging", "Initech Archives", "Umbrella Print")
CUSTOMERS = ("Contoso Legal", "Fabrikam Health", "Tailspin Logistics", "Wingtip Insurance")
ITEMS = (
    ("Page scanning (per 100)", Decimal("12.50")),
    ("OCR extraction (per doc)", Decimal("0.40")),
    ("Archive box storage", Decimal("3.75")),
    ("Courier pickup", Decimal("18.00")),
    ("Shredding (per kg)", Decimal("1.20")),
    ("Index review (hour)", Decimal("42.00")),
)
TAX_RATE = Decimal("0.20")
# Spelled out rather than strftime("%b"), which follows the process locale.
MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
CENT = Decimal("0.01")


class InvoiceParseError(ValueError):
    """The text is not an invoice we can read; no retry will change that."""


@dataclass(frozen=True)
class Invoice:
    number: str
    issued: date
    due: date
    vendor: str
    customer: str
    lines: tuple[tuple[str, int, Decimal], ...]  # description, quantity, unit price

    @property
    def subtotal(self) -> Decimal:
        return sum((q * p for _, q, p in self.lines), Decimal(0)).quantize(CENT)

    @property
    def tax(self) -> Decimal:
        return (self.subtotal * TAX_RATE).quantize(CENT, ROUND_HALF_UP)

    @property
    def total(self) -> Decimal:
        return self.subtotal + self.tax


def generate(rng: random.Random, serial: int, year: int = 2026) -> Invoice:
    issued = date(year, 1, 1) + timedelta(days=rng.randrange(0, 330))
    picks = rng.sample(ITEMS, rng.randint(2, 4))
    return Invoice(
        number=f"INV-{year}-{serial:06d}",
        issued=issued,
        due=issued + timedelta(days=30),
        vendor=rng.choice(VENDORS),
        customer=rng.choice(CUSTOMERS),
        lines=tuple((name, rng.randint(1, 40), price) for name, price in picks),
    )


def render(invoice: Invoice) -> str:
    """The invoice as a scanned page might read: labels, a line table, totals."""
    rows = [f"  {d:<28} {q:>4} x {p:>8} = {(q * p).quantize(CENT):>9}" for d, q, p in invoice.lines]
    return "\n".join(
        [
            invoice.vendor.upper(),
            "INVOICE",
            f"Invoice No.: {invoice.number}",
            f"Date: {invoice.issued.day:02d} {MONTH_NAMES[invoice.issued.month - 1]} {invoice.issued.year}",
            f"Due: {invoice.due.isoformat()}",
            f"Bill to: {invoice.customer}",
            "",
            "  Description                   Qty   Unit       Amount",
            *rows,
            "",
            f"Subtotal: EUR {invoice.subtotal:,}",
            f"VAT 20%: EUR {invoice.tax:,}",
            f"TOTAL DUE: EUR {invoice.total:,}",
        ]
    )


_NUMBER = re.compile(r"^Invoice No\.:\s*(INV-\d{4}-\d{6})\s*$", re.MULTILINE)
_DATE = re.compile(r"^Date:\s*(\d{1,2} [A-Z][a-z]{2} \d{4})\s*$", re.MULTILINE)
_DUE = re.compile(r"^Due:\s*(\d{4}-\d{2}-\d{2})\s*$", re.MULTILINE)
_BILL_TO = re.compile(r"^Bill to:\s*(.+?)\s*$", re.MULTILINE)
_LINE = re.compile(r"^\s+(.+?)\s+(\d+) x\s+([\d.]+) =\s+([\d.]+)\s*$", re.MULTILINE)
_MONEY = r"EUR\s*([\d,]+\.\d{2})"
_SUBTOTAL = re.compile(rf"^Subtotal:\s*{_MONEY}\s*$", re.MULTILINE)
_TAX = re.compile(rf"^VAT (\d+)%:\s*{_MONEY}\s*$", re.MULTILINE)
_TOTAL = re.compile(rf"^TOTAL DUE:\s*{_MONEY}\s*$", re.MULTILINE)
_MONTHS = {name: n for n, name in enumerate(MONTH_NAMES, start=1)}


def _find(pattern: re.Pattern[str], text: str, field: str) -> re.Match[str]:
    match = pattern.search(text)
    if match is None:
        raise InvoiceParseError(f"no {field} found")
    return match


def _money(text: str, field: str) -> Decimal:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        raise InvoiceParseError(f"{field} {text!r} is not an amount") from None


def _day(text: str) -> date:
    day, month, year = text.split()
    if month not in _MONTHS:
        raise InvoiceParseError(f"invoice date {text!r} has no known month")
    try:
        return date(int(year), _MONTHS[month], int(day))
    except ValueError:
        raise InvoiceParseError(f"invoice date {text!r} is not a calendar date") from None


def parse(text: str) -> dict[str, Any]:
    """Fields out of invoice text, cross-checked (lines add up to the subtotal, tax and total
    agree). Raises InvoiceParseError naming the first thing that does not read."""
    number = _find(_NUMBER, text, "invoice number").group(1)
    issued = _day(_find(_DATE, text, "invoice date").group(1))
    try:
        due = date.fromisoformat(_find(_DUE, text, "due date").group(1))
    except ValueError:
        raise InvoiceParseError("due date is not a calendar date") from None
    customer = _find(_BILL_TO, text, "customer").group(1)
    vendor = text.strip().splitlines()[0].strip().title()
    lines = []
    for m in _LINE.finditer(text):
        qty, unit, amount = int(m.group(2)), _money(m.group(3), "unit price"), _money(m.group(4), "line amount")
        if (qty * unit).quantize(CENT) != amount:
            raise InvoiceParseError(f"line {m.group(1)!r}: {qty} x {unit} is not {amount}")
        lines.append({"description": m.group(1), "quantity": qty, "unit_price": str(unit), "amount": str(amount)})
    if not lines:
        raise InvoiceParseError("no line items found")
    subtotal = _money(_find(_SUBTOTAL, text, "subtotal").group(1), "subtotal")
    tax_match = _find(_TAX, text, "VAT line")
    tax = _money(tax_match.group(2), "VAT")
    total = _money(_find(_TOTAL, text, "total").group(1), "total")
    if sum((Decimal(line["amount"]) for line in lines), Decimal(0)) != subtotal:
        raise InvoiceParseError(f"line items do not add up to the subtotal {subtotal}")
    if subtotal + tax != total:
        raise InvoiceParseError(f"subtotal {subtotal} + VAT {tax} is not the total {total}")
    if due < issued:
        raise InvoiceParseError(f"due date {due} is before the invoice date {issued}")
    return {
        "invoice_number": number,
        "issued": issued.isoformat(),
        "due": due.isoformat(),
        "vendor": vendor,
        "customer": customer,
        "currency": "EUR",
        "lines": lines,
        "subtotal": str(subtotal),
        "vat_rate_percent": int(tax_match.group(1)),
        "vat": str(tax),
        "total": str(total),
    }


def garble(text: str, rng: random.Random) -> str:
    """A scan gone wrong: the header torn off and the totals smudged."""
    kept = [line for line in text.splitlines() if not line.startswith(("Invoice No", "TOTAL"))]
    return "\n".join([*kept[:3], "~~ ## illegible ## ~~", *kept[3 + rng.randint(0, 2) :]])
