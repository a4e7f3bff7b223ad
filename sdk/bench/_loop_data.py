"""The loop bench's own tools and questions: deterministic fakes an app might offer, and
questions that need one of them or two in a row (`sdk.bench.loop`)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any, Literal

# ------------------------------------------------------------------------------ tools

_CAPITALS = {"japan": "Tokyo", "france": "Paris", "australia": "Canberra", "canada": "Ottawa",
             "italy": "Rome", "egypt": "Cairo", "brazil": "Brasília", "kenya": "Nairobi",
             "india": "New Delhi", "germany": "Berlin", "spain": "Madrid", "peru": "Lima"}  # fmt: skip
_USD_PER = {"USD": 1.0, "EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": 1.13, "CAD": 0.74}
_STOCKS = {"AAPL": 189.5, "MSFT": 411.2, "NVDA": 875.3, "TSLA": 201.4, "GOOGL": 142.8}
_UTC_OFFSETS = {"tokyo": 9, "paris": 1, "berlin": 1, "london": 0, "new_york": -5, "cairo": 2,
                "kolkata": 5.5, "delhi": 5.5, "sydney": 11, "canberra": 11, "ottawa": -5}  # fmt: skip


def _seed(text: str) -> int:
    """A stable number for any string (Python's `hash` changes per process)."""
    return sum(ord(c) * (i + 1) for i, c in enumerate(text.lower()))


def _currency(code: str) -> float:
    rate = _USD_PER.get(code.strip().upper())
    if rate is None:
        raise ValueError(f"unknown currency {code!r}; known: {', '.join(_USD_PER)}")
    return rate


def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> dict[str, Any]:
    """Current weather in a city (e.g. "Paris")."""
    celsius = 5 + _seed(city) % 25
    temp = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32, 1)
    sky = ("sunny", "cloudy", "light rain", "windy")[_seed(city) % 4]
    return {"city": city, "temperature": temp, "unit": unit, "conditions": sky}


def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
    """Convert an amount of money between currencies (ISO codes such as USD, EUR, JPY)."""
    value = round(amount * _currency(from_currency) / _currency(to_currency), 2)
    return {"amount": value, "currency": to_currency.upper()}


def convert_temperature(
    value: float, from_unit: Literal["C", "F"], to_unit: Literal["C", "F"]
) -> float:
    """Convert a temperature between Celsius (C) and Fahrenheit (F)."""
    if from_unit == to_unit:
        return value
    return round(value * 9 / 5 + 32 if from_unit == "C" else (value - 32) * 5 / 9, 1)


def search_flights(origin: str, destination: str, date: str) -> dict[str, Any]:
    """Search flights between two cities on a date (YYYY-MM-DD); prices are in EUR."""
    price = 60 + _seed(origin + destination) % 240
    flights = [{"flight": f"SK{100 + _seed(date) % 900}", "departs": "09:40", "price": price}]
    return {"origin": origin, "destination": destination, "date": date, "currency": "EUR",
            "flights": flights}  # fmt: skip


def get_capital(country: str) -> str:
    """The capital city of a country."""
    return _CAPITALS.get(country.strip().lower(), f"unknown country {country!r}")


def get_population(city: str) -> dict[str, Any]:
    """The population of a city."""
    return {"city": city, "population": 200_000 + _seed(city) * 997 % 9_000_000}


def get_time(timezone: str) -> str:
    """The current local time in a time zone (e.g. "Asia/Tokyo") or city."""
    key = timezone.strip().lower().replace(" ", "_").split("/")[-1]
    offset = _UTC_OFFSETS.get(key, 0)
    hours, minutes = int(12 + offset) % 24, int(offset % 1 * 60)
    return f"2026-03-01 {hours:02d}:{minutes:02d} ({timezone})"


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}  # fmt: skip


def _evaluate(node: ast.AST) -> float:
    """Numbers, + - * / // % ** and parentheses; anything else (names, calls) is refused."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large")
        return float(_BINARY[type(node.op)](left, right))
    raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")


def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression such as "(3 + 4) * 2"."""
    result = _evaluate(ast.parse(expression.replace("^", "**"), mode="eval"))
    return int(result) if result.is_integer() else round(result, 6)


def get_exchange_rate(base: str, quote: str) -> float:
    """How many units of the quote currency one unit of the base currency buys."""
    return round(_currency(base) / _currency(quote), 6)


def get_stock_price(symbol: str) -> dict[str, Any]:
    """The latest price of a stock by ticker symbol; prices are in USD."""
    price = _STOCKS.get(symbol.strip().upper(), 10 + _seed(symbol) % 500)
    return {"symbol": symbol.upper(), "price": price, "currency": "USD"}


OWN_TOOLS: tuple[Callable[..., Any], ...] = (
    get_weather, convert_currency, convert_temperature, search_flights, get_capital,
    get_population, get_time, calculate, get_exchange_rate, get_stock_price,
)  # fmt: skip

# ------------------------------------------------------------------------------ questions

SINGLE = """\
weather_paris|What's the weather in Paris?|get_weather
temp_21c|Convert 21 degrees Celsius to Fahrenheit.|convert_temperature
eur_usd|How much is 100 EUR in USD?|convert_currency
capital_au|What is the capital of Australia?|get_capital
pop_tokyo|What is the population of Tokyo?|get_population
time_tokyo|What time is it in Asia/Tokyo?|get_time
calc_1|What is 37 * 12 + 5?|calculate
stock_aapl|What's the current stock price of AAPL?|get_stock_price
rate_gbp_usd|What's the exchange rate from GBP to USD?|get_exchange_rate
flights_lon_nyc|Find flights from London to New York on 2026-03-15.|search_flights
rain_london|Is it raining in London right now?|get_weather
temp_98f|Convert 98.6 F to C.|convert_temperature
usd_jpy|How many Japanese yen is 250 US dollars?|convert_currency
capital_ca|What's the capital city of Canada?|get_capital
pop_berlin|How many people live in Berlin?|get_population
time_paris|What time is it in Europe/Paris?|get_time
calc_2|Compute (144 / 12) ** 2.|calculate
stock_msft|Give me the share price of MSFT.|get_stock_price
rate_eur_jpy|What is the EUR to JPY exchange rate?|get_exchange_rate
flights_mad_rom|Are there flights from Madrid to Rome on 2026-04-02?|search_flights
weather_sydney_f|Weather in Sydney in fahrenheit please.|get_weather
temp_0f|What is 0 degrees Fahrenheit in Celsius?|convert_temperature
chf_eur|Convert 1200 CHF to EUR.|convert_currency
capital_br|Which city is the capital of Brazil?|get_capital
pop_mumbai|What's the population of Mumbai?|get_population
time_nyc|Current time in America/New_York?|get_time
calc_3|What is 15% of 2400?|calculate
stock_nvda|What does NVDA trade at right now?|get_stock_price
rate_usd_cad|What is the USD to CAD exchange rate today?|get_exchange_rate
flights_par_ber|Search flights from Paris to Berlin for 2026-05-01.|search_flights"""

TWO = """\
weather_cap_jp|What is the weather in the capital of Japan?|get_capital,get_weather
pop_cap_fr|What is the population of the capital of France?|get_capital,get_population
flight_usd|How much is the flight from Paris to Rome on 2026-03-01 in USD?|search_flights,convert_currency
aapl_eur|What is the stock price of AAPL in EUR?|get_stock_price,convert_currency
time_cap_au|What time is it in the capital of Australia?|get_capital,get_time
usd_eur_x3|Convert 50 USD to EUR, then multiply the result by 3 with the calculator.|convert_currency,calculate
pop_tokyo_x2|What is twice the population of Tokyo? Use the calculator for the doubling.|get_population,calculate
msft_gbp|Get the stock price of MSFT and convert it to GBP.|get_stock_price,convert_currency
rate_jpy_40|Look up the USD to JPY exchange rate, then calculate how many yen 40 dollars buys.|get_exchange_rate,calculate
weather_cap_ca|What is the capital of Canada, and what's the weather there?|get_capital,get_weather
flight_gbp|Find flights from Berlin to Lisbon on 2026-05-20 and tell me the price in GBP.|search_flights,convert_currency
pop_cap_it|What is the population of the capital of Italy?|get_capital,get_population
time_cap_eg|What's the local time in the capital of Egypt?|get_capital,get_time
nvda_12|Look up the stock price of NVDA, then compute the cost of 12 shares.|get_stock_price,calculate
pop_berlin_k|What is the population of Berlin divided by 1000? Use the calculator.|get_population,calculate
weather_cap_br|What's the weather in the capital of Brazil?|get_capital,get_weather
rate_chf_75|Check the USD to CHF exchange rate and calculate how many francs 75 dollars buys.|get_exchange_rate,calculate
flight_jpy|How much do flights from Madrid to Paris on 2026-06-15 cost in JPY?|search_flights,convert_currency
pop_cap_ke|What is the capital of Kenya and how many people live there?|get_capital,get_population
tsla_jpy|What is the stock price of TSLA in Japanese yen?|get_stock_price,convert_currency"""
