"""Small readers of the T-SQL under sql/, shared by the tests/test_sqlserver_*.py files."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sqlheads_sql

ROOT = Path(__file__).resolve().parents[1]
LITERAL = r"N'((?:[^']|'')*)'"


def unquote(text: str) -> str:
    return text.replace("''", "'")


def strip_comments_and_strings(sql: str) -> str:
    """The T-SQL with string literals emptied and comments removed (for regex scans)."""
    return re.sub(
        r"--[^\n]*|N?'(?:[^']|'')*'",
        lambda m: "" if m.group(0).startswith("--") else "''",
        sql,
    )


@dataclass
class ExternalCall:
    """One ``sp_execute_external_script`` call, as written in a procedure."""

    path: Path
    script: str
    input_query: str
    params: dict[str, str]  # name -> declared type (OUTPUT ones included)
    outputs: set[str]
    result_columns: list[tuple[str, str]]  # WITH RESULT SETS (name, type)


def external_calls() -> list[ExternalCall]:
    calls = []
    for path in sqlheads_sql.object_files():
        text = path.read_text()
        if (
            "EXEC sys.sp_execute_external_script" not in text
        ):  # what heads.sign_external_scripts signs
            continue
        script = re.search(r"@script\s*=\s*" + LITERAL, text)
        query = re.search(r"@input_data_1\s*=\s*" + LITERAL, text)
        params = re.search(r"@params\s*=\s*" + LITERAL, text)
        result = re.search(r"WITH RESULT SETS \(\((.*?)\)\);", text, re.S)
        assert script and query and params and result, f"{path}: cannot read its external call"
        declared: dict[str, str] = {}
        outputs: set[str] = set()
        for part in split_top(unquote(params.group(1))):
            words = part.split()
            declared[words[0].lstrip("@")] = words[1]
            if words[-1].upper() == "OUTPUT":
                outputs.add(words[0].lstrip("@"))
        columns = []
        for part in split_top(result.group(1)):
            name, kind = part.split()[:2]
            columns.append((name, kind))
        calls.append(
            ExternalCall(
                path=path,
                script=unquote(script.group(1)),
                input_query=unquote(query.group(1)),
                params=declared,
                outputs=outputs,
                result_columns=columns,
            )
        )
    return calls


def split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def select_list_names(select_list: str) -> list[str]:
    """Output column names of a select list: the alias, else the column after the last dot."""
    names = []
    for item in split_top(select_list):
        alias = re.search(r"\bAS\s+\[?(\w+)\]?\s*$", item, re.I)
        names.append(alias.group(1) if alias else item.split(".")[-1].strip("[] \n"))
    return names


def input_columns(query: str) -> tuple[list[str], str]:
    """``SELECT a, b FROM #t``: (["a", "b"], "#t")."""
    match = re.fullmatch(r"\s*SELECT\s+(.*?)\s+FROM\s+(#\w+)\s*", query, re.S | re.I)
    assert match, f"the input query must be a plain SELECT from a temp table: {query!r}"
    return select_list_names(match.group(1)), match.group(2)


@dataclass
class Parameter:
    name: str
    type: str
    default: str | None  # None: required
    output: bool = False


def procedure_parameters(path: Path) -> list[Parameter]:
    """Parameters of ``CREATE OR ALTER PROCEDURE name <params> AS``."""
    text = path.read_text()
    header = re.search(r"CREATE OR ALTER PROCEDURE\s+[\w.]+\s*(.*?)\nAS\n", text, re.S)
    assert header, f"{path}: no procedure header"
    found = []
    for part in split_top(strip_comments_and_strings_keep(header.group(1))):
        match = re.fullmatch(
            r"@(\w+)\s+(\w+(?:\([\w, ]+\))?)(?:\s*=\s*(.+?))?(\s+OUTPUT)?", part.strip(), re.S
        )
        assert match, f"{path}: cannot read parameter {part!r}"
        found.append(
            Parameter(match.group(1), match.group(2), match.group(3), bool(match.group(4)))
        )
    return found


def strip_comments_and_strings_keep(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


# -- a reader of T-SQL statements (the third SQL Server audit, point 6) ------------------------
# Checks that judge where words sit in a file pass wrong control flow; these read tokens,
# statements and blocks as the server would, for the contract check over every revision
# (tests/test_sqlserver_statements.py) and the policies that depend on control flow.

_TOKEN = re.compile(
    r"(?P<comment>--[^\n]*|/\*.*?\*/)"
    r"|(?P<string>N?'(?:[^']|'')*')"
    r"|(?P<name>\[(?:[^\]]|\]\])*\]|[A-Za-z_#][\w#$]*(?:\.(?:\[(?:[^\]]|\]\])*\]|[A-Za-z_#][\w#$]*))*)"
    r"|(?P<variable>@@?\w+)"
    r"|(?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<symbol><>|<=|>=|!=|\+=|-=|::|[(),;=<>+\-*/%.!~&|^])"
    r"|(?P<space>\s+)",
    re.S,
)


@dataclass(frozen=True)
class Token:
    kind: str  # string, name, variable, number, symbol
    text: str
    line: int

    @property
    def upper(self) -> str:
        return self.text.upper()

    def is_word(self, *words: str) -> bool:
        return self.kind == "name" and self.upper in words


def tokens(sql: str) -> list[Token]:
    """The tokens of ``sql`` without comments and spaces; a string token keeps its quotes."""
    found, at, line = [], 0, 1
    while at < len(sql):
        match = _TOKEN.match(sql, at)
        assert match, f"cannot read T-SQL at line {line}: {sql[at : at + 40]!r}"
        kind = match.lastgroup
        if kind not in ("comment", "space"):
            found.append(Token(kind, match.group(0), line))
        line += match.group(0).count("\n")
        at = match.end()
    return found


def literal(token: Token) -> str:
    """The value of a string token."""
    return unquote(token.text[2:-1] if token.text.startswith("N") else token.text[1:-1])


@dataclass
class ExecArgument:
    parameter: str | None  # @name = ..., lower-case without @; None: positional
    value: list[Token]
    output: bool


@dataclass
class ExecCall:
    procedure: str  # as written, e.g. heads.write_version (lower-case)
    arguments: list[ExecArgument]
    line: int
    into_table: bool  # INSERT INTO ... EXEC: runs inside the INSERT's transaction
    named: list[int]  # indexes of the @name tokens that name the callee's parameters


def exec_calls(found: list[Token]) -> list[ExecCall]:
    """Every ``EXEC[UTE] [@result =] name [@p = value [OUTPUT], ...]`` among ``found``, and
    those inside the text ``sys.sp_executesql`` is given (dynamic SQL written as a literal)."""
    calls = []
    for i, token in enumerate(found):
        if not token.is_word("EXEC", "EXECUTE") or i + 1 >= len(found):
            continue
        j = i + 1
        if found[j].kind == "variable" and j + 1 < len(found) and found[j + 1].text == "=":
            j += 2  # EXEC @result = procedure
        if found[j].kind != "name":
            continue  # EXEC (@sql), EXECUTE AS: no procedure call
        if found[j].is_word("AS"):
            continue
        name, j = found[j].text.lower(), j + 1
        arguments, named = [], []
        while j < len(found) and not (found[j].text == ";" or _starts_statement(found[j])):
            parameter = None
            if found[j].kind == "variable" and j + 1 < len(found) and found[j + 1].text == "=":
                parameter = found[j].text[1:].lower()
                named.append(j)
                j += 2
            value = []
            while (
                j < len(found)
                and found[j].text not in (",", ";")
                and not (
                    found[j].is_word("OUTPUT", "OUT") or (value and _starts_statement(found[j]))
                )
            ):
                value.append(found[j])
                j += 1
            output = j < len(found) and found[j].is_word("OUTPUT", "OUT")
            j += output
            arguments.append(ExecArgument(parameter, value, output))
            if j < len(found) and found[j].text == ",":
                j += 1
                continue
            break
        back = i - 1
        if back >= 0 and found[back].text == ")":  # INSERT INTO #t (columns) EXEC
            depth = 0
            while back >= 0:
                depth += {")": 1, "(": -1}.get(found[back].text, 0)
                if depth == 0:
                    break
                back -= 1
            back -= 1
        into = back >= 1 and found[back - 1].is_word("INTO", "INSERT")
        calls.append(ExecCall(name, arguments, token.line, into, named))
        if name == "sys.sp_executesql" and arguments and arguments[0].value:
            text = arguments[0].value[0]
            if text.kind == "string":
                for inner in exec_calls(tokens(literal(text))):
                    inner.into_table = inner.into_table or into
                    calls.append(inner)
    return calls


STATEMENT_WORDS = {
    "SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "SET", "DECLARE", "EXEC", "EXECUTE", "IF",
    "ELSE", "WHILE", "BEGIN", "END", "RETURN", "BREAK", "CONTINUE", "THROW", "COMMIT", "ROLLBACK",
    "CREATE", "DROP", "ALTER", "GRANT", "REVOKE", "DENY", "TRUNCATE", "PRINT", "RAISERROR",
    "WAITFOR", "WITH", "USE", "REVERT", "OPEN", "CLOSE", "FETCH", "DEALLOCATE",
}  # fmt: skip


def _starts_statement(token: Token) -> bool:
    return token.kind == "name" and token.upper in STATEMENT_WORDS


@dataclass
class Statement:
    """A simple statement (``body`` empty), or a block: IF (``body``, ``orelse``), WHILE,
    BEGIN...END, BEGIN TRY ... END TRY BEGIN CATCH ... END CATCH (``body``, ``catch``)."""

    kind: str  # the first word(s): SELECT, EXEC, IF, WHILE, BLOCK, TRY, BEGIN TRANSACTION ...
    tokens: list[Token]
    body: list[Statement]
    orelse: list[Statement]
    catch: list[Statement]

    @property
    def line(self) -> int:
        return self.tokens[0].line if self.tokens else 0

    @property
    def text(self) -> str:
        return " ".join(t.text for t in self.tokens)


def statements(found: list[Token]) -> list[Statement]:
    """The statement tree of a batch's tokens (a procedure's body: pass the tokens after AS)."""
    parsed, at = _block(found, 0, ())
    return parsed


def procedure_body(path: Path) -> list[Statement]:
    """The statements of a procedure's body (what follows its header's AS)."""
    found = tokens(sqlheads_sql.batches(path)[-1])
    start = next(i for i, t in enumerate(found) if t.is_word("AS")) + 1
    return statements(found[start:])


def _block(found: list[Token], at: int, ends: tuple[str, ...]) -> tuple[list[Statement], int]:
    parsed = []
    while at < len(found):
        token = found[at]
        if token.text == ";":
            at += 1
            continue
        if token.is_word(*ends):
            return parsed, at
        statement, at = _statement(found, at)
        parsed.append(statement)
    return parsed, at


def _statement(found: list[Token], at: int) -> tuple[Statement, int]:
    token = found[at]
    nxt = found[at + 1] if at + 1 < len(found) else None
    if token.is_word("BEGIN") and nxt is not None and nxt.is_word("TRY"):
        body, at = _block(found, at + 2, ("END",))
        at += 2  # END TRY
        assert found[at].is_word("BEGIN") and found[at + 1].is_word("CATCH"), found[at]
        catch, at = _block(found, at + 2, ("END",))
        return Statement("TRY", [token], body, [], catch), at + 2  # END CATCH
    if token.is_word("BEGIN") and not (
        nxt is not None and nxt.is_word("TRANSACTION", "TRAN", "DISTRIBUTED")
    ):
        body, at = _block(found, at + 1, ("END",))
        return Statement("BLOCK", [token], body, [], []), at + 1
    if token.is_word("IF", "WHILE"):
        condition_end, depth = at + 1, 0
        while condition_end < len(found):
            t = found[condition_end]
            depth += {"(": 1, ")": -1}.get(t.text, 0)
            if depth == 0 and _starts_statement(t) and condition_end > at + 1:
                break
            condition_end += 1
        body, after = _statement(found, condition_end)
        orelse: list[Statement] = []
        while after < len(found) and found[after].text == ";":
            after += 1
        if token.is_word("IF") and after < len(found) and found[after].is_word("ELSE"):
            orelse_statement, after = _statement(found, after + 1)
            orelse = [orelse_statement]
        kind = token.upper
        return Statement(kind, found[at:condition_end], [body], orelse, []), after
    end, depth, cases = at + 1, {"(": 1, ")": -1}.get(token.text, 0), 0
    until_semicolon = token.is_word("GRANT", "REVOKE", "DENY")
    while end < len(found):
        t = found[end]
        if t.is_word("CASE"):
            cases += 1
        elif t.is_word("END") and cases:
            cases -= 1
            end += 1
            continue
        if depth == 0 and t.text == ";":
            break
        if (
            depth == 0
            and not cases
            and not until_semicolon
            and _starts_statement(t)
            and not _continues(found, end, token)
        ):
            break
        depth += {"(": 1, ")": -1}.get(t.text, 0)
        end += 1
    kind = (
        " ".join(t.upper for t in found[at : at + 2])
        if token.is_word("BEGIN", "COMMIT", "ROLLBACK")
        else token.upper
    )
    return Statement(kind, found[at:end], [], [], []), end


def _continues(found: list[Token], at: int, first: Token) -> bool:
    """A statement word that belongs to the statement begun by ``first``: INSERT ... SELECT
    or EXEC, UPDATE ... SET, a CTE's statement after WITH ... AS (...)."""
    word, before = found[at].upper, found[at - 1]
    if word in ("SELECT", "EXEC", "EXECUTE", "WITH") and (
        before.text == ")" or before.kind in ("name", "variable")
    ):
        return True
    if first.is_word("WITH") and before.text == ")" and word in ("UPDATE", "DELETE", "INSERT"):
        return True
    return word == "SET" and before.kind == "name" and first.is_word("UPDATE", "WITH")


# -- the transactions each path holds -----------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    """One path's state: @@TRANCOUNT and the statement (line) that began its transaction."""

    depth: int
    began: int  # 0: no transaction open


def transactions(
    body: list[Statement], probe: Callable[[Statement], str | None]
) -> dict[str, set[Flow]]:
    """The states in which each probed statement can run, over every path of ``body``: IF
    takes either branch, WHILE runs any number of times, BREAK, CONTINUE, RETURN and THROW
    end their path as the server's control flow does, CATCH runs from any state of its TRY."""
    seen: dict[str, set[Flow]] = {}
    _run(body, {Flow(0, 0)}, probe, seen)
    return seen


def _run(body, states, probe, seen):
    breaks, continues = set(), set()
    for statement in body:
        if not states:
            break
        label = probe(statement)
        if label is not None:
            seen.setdefault(label, set()).update(states)
        states, brk, cont = _step(statement, states, probe, seen)
        breaks |= brk
        continues |= cont
    return states, breaks, continues


def _step(statement, states, probe, seen):
    kind = statement.kind
    if kind in ("BEGIN TRANSACTION", "BEGIN TRAN"):
        return {Flow(s.depth + 1, s.began or statement.line) for s in states}, set(), set()
    if kind in ("COMMIT TRANSACTION", "COMMIT TRAN", "COMMIT"):
        return (
            {Flow(max(s.depth - 1, 0), s.began if s.depth > 1 else 0) for s in states},
            (set()),
            set(),
        )
    if kind.startswith("ROLLBACK"):
        return {Flow(0, 0)}, set(), set()
    if kind in ("THROW", "RETURN"):
        return set(), set(), set()
    if kind == "BREAK":
        return set(), set(states), set()
    if kind == "CONTINUE":
        return set(), set(), set(states)
    if kind == "BLOCK":
        return _run(statement.body, states, probe, seen)
    if kind == "IF":
        then, brk, cont = _run(statement.body, states, probe, seen)
        other, brk2, cont2 = (states, set(), set())
        if statement.orelse:
            other, brk2, cont2 = _run(statement.orelse, states, probe, seen)
        return then | other, brk | brk2, cont | cont2
    if kind == "WHILE":
        head, exits = set(states), set()
        endless = _constant(statement.tokens[1:]) is True  # WHILE 1 = 1: left by BREAK alone
        while True:
            out, brk, cont = _run(statement.body, head, probe, seen)
            exits |= brk
            grown = head | out | cont
            if grown == head:
                return exits if endless else head | exits, set(), set()
            head = {Flow(min(s.depth, 5), s.began) for s in grown}
    if kind == "TRY":
        inside: dict[str, set[Flow]] = {}
        out, brk, cont = _run(statement.body, states, lambda s: "any", inside)
        _run(statement.body, states, probe, seen)
        caught, brk2, cont2 = _run(statement.catch, inside.get("any", set()), probe, seen)
        return out | caught, brk | brk2, cont | cont2
    return states, set(), set()


def _constant(found: list[Token]) -> object:
    """The value of a condition that names nothing (``1 = 1``); None when it names something."""
    try:
        return Expression(found, {}, {}).value()
    except (KeyError, AssertionError, IndexError):
        return None


# -- an evaluator of T-SQL expressions, NULL as UNKNOWN -----------------------------------------


class Expression:
    """Evaluates a T-SQL scalar or boolean expression's tokens against ``names`` (``@var``,
    ``alias.column``) and ``functions`` (name -> callable), with T-SQL's three-valued logic:
    None is NULL, and UNKNOWN for a predicate (``x <> NULL`` is UNKNOWN, not TRUE)."""

    def __init__(self, found: list[Token], names: dict, functions: dict) -> None:
        self.found, self.at = found, 0
        self.names = {k.lower(): v for k, v in names.items()}
        self.functions = {k.upper(): v for k, v in functions.items()} | {
            "CONVERT": lambda _type, value: value,
            "COALESCE": lambda *values: next((v for v in values if v is not None), None),
            "QUOTENAME": lambda v: None if v is None else "[" + v.replace("]", "]]") + "]",
        }

    def value(self):
        result = self._or()
        assert self.at == len(self.found), f"unread: {self.found[self.at :]}"
        return result

    def _peek(self, *words):
        return self.at < len(self.found) and (
            self.found[self.at].upper in words or self.found[self.at].text in words
        )

    def _take(self):
        self.at += 1
        return self.found[self.at - 1]

    def _or(self):
        left = self._and()
        while self._peek("OR"):
            self._take()
            right = self._and()
            left = True if True in (left, right) else None if None in (left, right) else False
        return left

    def _and(self):
        left = self._not()
        while self._peek("AND"):
            self._take()
            right = self._not()
            left = False if False in (left, right) else None if None in (left, right) else True
        return left

    def _not(self):
        if self._peek("NOT"):
            self._take()
            inner = self._not()
            return None if inner is None else not inner
        return self._comparison()

    def _comparison(self):
        left = self._sum()
        if self._peek("IS"):
            self._take()
            negate = self._peek("NOT") and bool(self._take())
            assert self._take().upper == "NULL"
            return (left is None) != negate
        negate = self._peek("NOT") and bool(self._take())
        if self._peek("IN"):
            self._take()
            assert self._take().text == "("
            options = [self._sum()]
            while self._take().text == ",":
                options.append(self._sum())
            found = None if left is None else left in options
            return None if found is None else found != negate
        for operator, test in (
            ("=", lambda a, b: a == b),
            ("<>", lambda a, b: a != b),
            ("!=", lambda a, b: a != b),
            ("<", lambda a, b: a < b),
            (">", lambda a, b: a > b),
        ):
            if self._peek(operator):
                self._take()
                right = self._sum()
                return None if left is None or right is None else test(left, right)
        return left

    def _sum(self):
        left = self._primary()
        while self._peek("+", "-"):
            operator, right = self._take().text, self._primary()
            if left is None or right is None:
                left = None
            else:
                left = left + right if operator == "+" else left - right
        return left

    def _primary(self):
        token = self._take()
        if token.text == "(":
            inner = self._or()
            assert self._take().text == ")"
            result = inner
        elif token.kind == "string":
            result = literal(token)
        elif token.kind == "number":
            result = float(token.text) if "." in token.text else int(token.text)
        elif token.is_word("NULL"):
            result = None
        elif token.is_word("CASE"):
            result = self._case()
        elif token.kind == "name" and self._peek("("):
            self._take()
            arguments = []
            if not self._peek(")"):
                arguments.append(self._argument())
                while self._peek(","):
                    self._take()
                    arguments.append(self._argument())
            assert self._take().text == ")"
            result = self.functions[token.upper](*arguments)
        else:
            result = self.names[token.text.lower()]
        if self._peek("COLLATE"):  # the collation changes no value here
            self._take()
            self._take()
        return result

    def _argument(self):
        if self.found[self.at].kind == "name" and self.found[self.at].upper in (
            "NVARCHAR", "VARCHAR", "INT", "BIGINT", "VARBINARY", "FLOAT", "BIT", "SYSNAME",
        ):  # fmt: skip
            self._take()
            if self._peek("("):
                while self._take().text != ")":
                    pass
            return None
        return self._or()

    def _case(self):
        chosen, done = None, False
        while self._peek("WHEN"):
            self._take()
            condition = self._or()
            assert self._take().upper == "THEN"
            result = self._or()
            if condition is True and not done:
                chosen, done = result, True
        if self._peek("ELSE"):
            self._take()
            result = self._or()
            if not done:
                chosen = result
        assert self._take().upper == "END"
        return chosen
