"""The tutorial's agent (docs/tutorial.md): a bookshop assistant, tested offline.

A ScriptedModel plays the model's side; the tools and the loop really run."""

from agentloops import ModelClient, ReActLoop, tool
from agentloops.testing import ScriptedModel, use_tools

BOOKS = {  # fixture data: a very small bookshop
    "9780441013593": {"title": "Dune", "price_eur": 9.99, "stock": 3},
    "9780141439587": {"title": "Emma", "price_eur": 6.50, "stock": 0},
}


@tool
def search_books(query: str) -> list[dict]:
    """Find books whose title contains `query` (any case). Returns ISBN, title and price."""
    return [
        {"isbn": isbn, "title": b["title"], "price_eur": b["price_eur"]}
        for isbn, b in BOOKS.items()
        if query.lower() in str(b["title"]).lower()
    ]


@tool
def check_stock(isbn: str) -> int:
    """How many copies of the book with this ISBN (from search_books) are in stock."""
    return int(BOOKS[isbn]["stock"])  # an unknown ISBN: the model gets an error it can act on


def build_agent(model: ModelClient) -> ReActLoop:
    system = "You are a bookshop assistant. Use the tools; never guess a price or a stock level."
    return ReActLoop(model, [search_books, check_stock], system=system, max_steps=6)


def test_agent_answers_from_the_tools() -> None:
    search = use_tools(("search_books", {"query": "dune"}))
    stock = use_tools(("check_stock", {"isbn": "9780441013593"}))
    model = ScriptedModel([search, stock, "Dune costs 9.99 EUR and 3 copies are in stock."])
    result = build_agent(model).run("Do you have Dune, and what does it cost?")
    result.raise_for_stop()  # raises StepLimitExceeded & co. unless the model answered
    assert result.answer == "Dune costs 9.99 EUR and 3 copies are in stock."
    assert (result.model_calls, result.tool_calls) == (3, 2)
    shown = model.requests[-1].messages[-1].tool_results[0]  # what the model was shown
    assert (shown.content, shown.is_error) == ("3", False)
    model.assert_complete()


if __name__ == "__main__":
    test_agent_answers_from_the_tools()
    print("ok: the bookshop agent answered from its tools (offline, scripted model)")
