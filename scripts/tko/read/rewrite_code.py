"""The concrete code change of a catalog rewrite, written in the user's own names.

``references/rewrite_catalog.yaml`` gives each pattern's replacement as a template (``after``). Where
the model code is one of the forms the trial arms rewrite, :func:`propose` reads the function's
statements with :mod:`ast` and returns the lines to replace and their replacement: the same
expressions for q, k, v, the mask, the scale, the input, the weight and eps that the model uses. It
mirrors the FX matchers of the arms (``tko.remedies.attention_rewrite``, ``norm_rewrite``,
``gate_rewrite``, ``cross_entropy_rewrite``), so the change shown is the change measured; any other form gets no proposal and a
reason, and the report keeps the template. A proposal never drops a statement sharing a line with
the ones it replaces, and the changed file must parse.

    att = (q @ k.transpose(-2, -1)) / math.sqrt(d)     ->   y = F.scaled_dot_product_attention(
    att = att.masked_fill(mask, float("-inf"))                   q, k, v, attn_mask=~mask, scale=1 / math.sqrt(d))
    att = F.softmax(att, dim=-1)
    y = att @ v

    x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)  ->  F.rms_norm(x, (x.shape[-1],), eps=eps)
    (x - mean) / torch.sqrt(var + eps) * w + b              ->  F.layer_norm(x, (x.shape[-1],), w, b, eps)

    self.down(F.silu(self.gate(x)) * self.up(x))   ->   gate, up = F.linear(x, torch.cat([self.gate.weight,
                                                          self.up.weight]), ...).chunk(2, dim=-1)
                                                        self.down(F.silu(gate) * up)

    loss = F.cross_entropy(self.lm_head(h).view(-1, V), y)  ->  from tko.remedies.cross_entropy_rewrite import
                                                                    linear_cross_entropy
                                                                loss = linear_cross_entropy(h, self.lm_head.weight,
                                                                                            self.lm_head.bias, y)
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

MASK_FILL_MAX = -1e4       # as tko.remedies.attention_rewrite: a fill at or under this masks out


class NoMatch(Exception):
    """The code is not a form the rewrite covers; the message says which part."""


@dataclass
class Block:
    """The statements around the pattern (one body of the function) and the module's names."""
    stmts: list
    fn: ast.AST
    functional: str | None                   # how the module spells torch.nn.functional (None: it cannot)
    torch: str | None = None                 # how it spells torch (None: not imported)
    consumed: set = field(default_factory=set)  # indices of statements the change replaces

    def assigned_before(self, name: str, index: int):
        """(value, index) of the last ``name = value`` before statement ``index``, else None."""
        for i in range(index - 1, -1, -1):
            st = self.stmts[i]
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                    and st.targets[0].id == name:
                return st.value, i
            if name in _stored(st):
                return None    # assigned some other way (a tuple, a loop): not followed
        return None

    def optional_mask(self, name: str, index: int):
        """(mask, index) of ``if mask is not None: name = name + mask`` as the last statement before
        ``index`` to assign ``name``: SDPA's ``attn_mask`` takes the mask or None alike."""
        for i in range(index - 1, -1, -1):
            st = self.stmts[i]
            if name not in _stored(st):
                continue
            if not (isinstance(st, ast.If) and not st.orelse and len(st.body) == 1
                    and isinstance(st.test, ast.Compare) and len(st.test.ops) == 1
                    and isinstance(st.test.ops[0], ast.IsNot) and ast.unparse(st.test.comparators[0]) == "None"):
                return None
            body = st.body[0]
            add = body.value if isinstance(body, ast.Assign) and len(body.targets) == 1 else None
            if isinstance(add, ast.BinOp) and isinstance(add.op, ast.Add) and ast.unparse(body.targets[0]) == name \
                    and ast.unparse(add.left) == name and _same(add.right, st.test.left):
                return add.right, i
            return None
        return None

    def resolve(self, node, index: int, consume: bool = True):
        """``node`` with one level of a plain name followed to its assignment (consumed)."""
        if isinstance(node, ast.Name):
            found = self.assigned_before(node.id, index)
            if found:
                if consume:
                    self.consumed.add(found[1])
                return found
        return node, index


def _stored(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _loaded(node) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _call(node, *names: str) -> bool:
    """A call of a function or method whose last name is one of ``names``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None) in names


def _arg(call: ast.Call, pos: int, name: str):
    kw = next((k.value for k in call.keywords if k.arg == name), None)
    return kw if kw is not None else call.args[pos] if len(call.args) > pos else None


def _number(node) -> float | None:
    """A literal number, ``float("-inf")``, ``-math.inf``, ``-float("inf")``; else None."""
    try:
        value = ast.literal_eval(node)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    if _call(node, "float") and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        try:
            return float(node.args[0].value)
        except ValueError:
            return None
    if isinstance(node, ast.Attribute) and node.attr == "inf" and isinstance(node.value, ast.Name):
        return float("inf")     # math.inf, np.inf, torch.inf
    return None


def _is_module_name(node) -> bool:
    """``F``, ``torch``, ``functional``, ``nn.functional``, ``torch.nn.functional``: a function, not a tensor."""
    text = ast.unparse(node)
    return text in ("F", "torch", "functional", "nn.functional", "torch.nn.functional")


def _same(a, b) -> bool:
    return ast.dump(a) == ast.dump(b)


def _upcast_inner(node):
    """``x`` of ``x.float()`` / ``x.to(torch.float32)``, else None."""
    if _call(node, "float") and isinstance(node.func, ast.Attribute) and not node.args:
        return node.func.value
    if _call(node, "to") and isinstance(node.func, ast.Attribute) and len(node.args) == 1 \
            and ast.unparse(node.args[0]) in ("torch.float32", "torch.float"):
        return node.func.value
    return None


def _downcast_inner(node):
    """``x`` of ``x.to(<name>.dtype)`` / ``x.type_as(t)`` / ``x.type(<dtype>)`` / ``x.to(<dtype name>)``, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 1 \
            and not node.keywords and node.func.attr in ("to", "type_as", "type"):
        return node.func.value
    return None


def torch_name(tree: ast.AST) -> str | None:
    """The name ``import torch`` (or ``import torch as th``) binds in the module, else None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch":
                    return a.asname or "torch"
    return None


def functional_name(tree: ast.AST) -> str | None:
    """How the module names torch.nn.functional (``F`` for ``import torch.nn.functional as F``,
    ``torch.nn.functional`` after ``import torch``); None when it binds no name to reach it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch.nn.functional" and a.asname:
                    return a.asname
        if isinstance(node, ast.ImportFrom) and node.module == "torch.nn" and not node.level:
            for a in node.names:
                if a.name == "functional":
                    return a.asname or "functional"
    torch = torch_name(tree)
    return f"{torch}.nn.functional" if torch else None


def _matmul(node):
    """(a, b) of ``a @ b``, ``torch.matmul(a, b)``, ``torch.bmm(a, b)``; else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return node.left, node.right
    if _call(node, "matmul", "bmm") and isinstance(node.func, ast.Attribute) and _is_module_name(node.func.value) \
            and len(node.args) == 2:
        return node.args[0], node.args[1]
    return None


def _key_of(kt):
    """(k, four_d) of ``k.transpose(-2, -1)``, ``torch.transpose(k, -1, -2)``, ``k.mT``, or of
    ``k.transpose(2, 3)`` (the last two dims of a 4-D k: ``four_d``); else None."""
    if isinstance(kt, ast.Attribute) and kt.attr == "mT":
        return kt.value, False
    if not _call(kt, "transpose"):
        return None
    method = not _is_module_name(kt.func.value) if isinstance(kt.func, ast.Attribute) else False
    k, dims = (kt.func.value, kt.args) if method else (kt.args[0] if kt.args else None, kt.args[1:])
    dims = {_number(d) for d in dims} if k is not None and len(dims) == 2 else set()
    return (k, False) if dims == {-2.0, -1.0} else (k, True) if dims == {2.0, 3.0} else None


def _softmax_input(node):
    """(scores, upcast) of ``softmax(scores, dim=-1)`` (function or method form); a float32 upcast
    (``dtype=torch.float32``, ``scores.float()``) is looked through and reported."""
    f = node.func
    method = isinstance(f, ast.Attribute) and not _is_module_name(f.value)
    scores, dim = (f.value, _arg(node, 0, "dim")) if method else (_arg(node, 0, "input"), _arg(node, 1, "dim"))
    if scores is None or _number(dim) != -1:
        raise NoMatch("a softmax over another dim than the last")
    upcast = False
    dtype = next((k.value for k in node.keywords if k.arg == "dtype"), None)
    if dtype is not None:
        if ast.unparse(dtype) not in ("torch.float32", "torch.float"):
            raise NoMatch(f"a softmax with dtype={ast.unparse(dtype)}")
        upcast = True
    inner = _upcast_inner(scores)
    return (inner, True) if inner is not None else (scores, upcast)


def _mask_of(node):
    """(scores, ("bool" | "additive", mask)) of a masked_fill with a masking fill or ``scores + bias``."""
    if _call(node, "masked_fill"):
        method = isinstance(node.func, ast.Attribute) and not _is_module_name(node.func.value)
        inner, m, fill = ((node.func.value, _arg(node, 0, "mask"), _arg(node, 1, "value")) if method else
                          (_arg(node, 0, "input"), _arg(node, 1, "mask"), _arg(node, 2, "value")))
        finfo_min = fill is not None and "finfo" in ast.unparse(fill) and ast.unparse(fill).endswith(".min")
        value = _number(fill) if fill is not None else None
        if inner is None or m is None or not (finfo_min or (value is not None and value <= MASK_FILL_MAX)):
            raise NoMatch("a masked_fill whose fill does not mask out (over -1e4)")
        return inner, ("bool", m)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _number(node.left) is None \
            and _number(node.right) is None:
        return node.left, ("additive", node.right)
    return None


def _scale_of(block: Block, node, index: int):
    """(scores, scale expression, index) of ``s * c``, ``c * s``, ``s / d`` around the q @ k^T; else None."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div))):
        return None
    if isinstance(node.op, ast.Div):
        return node.left, ast.BinOp(ast.Constant(1), ast.Div(), node.right), index
    for inner, scale in ((node.left, node.right), (node.right, node.left)):
        if _matmul(block.resolve(inner, index, consume=False)[0]):
            return inner, scale, index
    return None


def _scores(block: Block, scores, index: int):
    """q, k, mask and scale of the scores chain ending at ``scores``, names followed back."""
    mask = None
    optional = block.optional_mask(scores.id, index) if isinstance(scores, ast.Name) else None
    if optional:
        mask, index = ("additive", optional[0]), optional[1]
        block.consumed.add(index)
    node, index = block.resolve(scores, index)
    found = None if mask else _mask_of(node)
    if found:
        inner, mask = found
        node, index = block.resolve(inner, index)
    scale = None
    found = _scale_of(block, node, index)
    if found:
        node, scale, index = found
        node, index = block.resolve(node, index)
    qk = _matmul(node)
    key = _key_of(qk[1]) if qk else None
    if key is None:
        raise NoMatch("the scores are not q @ k.transpose(-2, -1) (a scale and a mask around it at most)")
    return qk[0], key, mask, scale


def _dropout_p(st, name: str) -> str | None:
    """The dropout probability of ``name = self.drop(name)`` / ``name = F.dropout(name, p, training)``
    as SDPA's ``dropout_p`` expression; None when ``st`` is no such statement."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
            and st.targets[0].id == name and isinstance(st.value, ast.Call)):
        return None
    call = st.value
    first = call.args[0] if call.args else None
    if not (isinstance(first, ast.Name) and first.id == name):
        return None
    if _call(call, "dropout") and isinstance(call.func, ast.Attribute) and _is_module_name(call.func.value):
        p, training = _arg(call, 1, "p"), _arg(call, 2, "training")
        p_text = ast.unparse(p) if p is not None else "0.5"
        return p_text if training is None else f"{p_text} if {ast.unparse(training)} else 0.0"
    callee = ast.unparse(call.func)
    if len(call.args) == 1 and not call.keywords and "drop" in callee.lower():
        return f"{callee}.p if self.training else 0.0"    # an nn.Dropout module: its p, off in eval
    return None


def _recast(st, name: str) -> bool:
    """``name = name.to(...)`` / ``.type(...)`` / ``.type_as(...)``: a cast of the weights alone."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
            and st.targets[0].id == name):
        return False
    inner = _downcast_inner(st.value)
    return isinstance(inner, ast.Name) and inner.id == name


def _consumer(block: Block, i: int, name: str):
    """(j, the ``name @ v`` node, dropout_p) of the statement after ``i`` that multiplies the weights by v."""
    drop = None
    for j in range(i + 1, len(block.stmts)):
        st = block.stmts[j]
        if name not in _loaded(st):
            if name in _stored(st):
                raise NoMatch(f"{name} is assigned again before {name} @ v")
            continue
        p = _dropout_p(st, name)
        if p is not None and drop is None:
            drop = p
            block.consumed.add(j)
            continue
        if _recast(st, name):     # name = name.type(v.dtype): SDPA returns the inputs' dtype already
            block.consumed.add(j)
            continue
        uses = [n for n in ast.walk(st) if _matmul(n) and isinstance(_matmul(n)[0], ast.Name)
                and _matmul(n)[0].id == name]
        if len(uses) != 1 or _loaded(st).count(name) != 1:
            raise NoMatch(f"the attention weights {name} are used other than in {name} @ v (line {st.lineno})")
        return j, uses[0], drop
    raise NoMatch("no weights @ v after the softmax in the same block")


def _negate(mask) -> ast.AST:
    """``~mask`` written plainly: ``a == b`` -> ``a != b``, ``~m`` / ``not m`` -> ``m``."""
    if isinstance(mask, ast.Compare) and len(mask.ops) == 1 and isinstance(mask.ops[0], (ast.Eq, ast.NotEq)):
        op = ast.NotEq() if isinstance(mask.ops[0], ast.Eq) else ast.Eq()
        return ast.Compare(mask.left, [op], mask.comparators)
    if isinstance(mask, ast.UnaryOp) and isinstance(mask.op, (ast.Invert, ast.Not)):
        return mask.operand
    return ast.UnaryOp(ast.Invert(), mask)


def _in_place_use(st, soft):
    """The ``softmax(...) @ v`` node inside ``st`` when the weights are never named."""
    for n in ast.walk(st):
        mm = _matmul(n)
        if mm and (mm[0] is soft or _downcast_inner(mm[0]) is soft):
            return n
    return None


def _replace(stmt, old, new):
    """A copy of ``stmt`` with the node at ``old``'s place swapped for ``new``."""
    def place(n):
        return (type(n), getattr(n, "lineno", None), getattr(n, "col_offset", None),
                getattr(n, "end_lineno", None), getattr(n, "end_col_offset", None))

    key = place(old)

    class Swap(ast.NodeTransformer):
        def visit(self, node):
            return new if place(node) == key else super().visit(node)

    return Swap().visit(copy.deepcopy(stmt))


def _functional(block: Block, name: str, args: list, keywords: list) -> ast.Call:
    if block.functional is None:
        raise NoMatch("the module imports neither torch nor torch.nn.functional under a name")
    func = ast.parse(f"{block.functional}.{name}", mode="eval").body
    return ast.Call(func, args, [ast.keyword(k, v) for k, v in keywords])


def _attention(block: Block, i: int, line: int):
    """(new statement, index it replaces, notes) for attention written by hand around the softmax."""
    soft = None
    for i in range(i, len(block.stmts)):      # the statements that start on the line, in order
        st = block.stmts[i]
        soft = next((n for n in ast.walk(st) if _call(n, "softmax")), None)
        if soft is not None or i + 1 == len(block.stmts) or block.stmts[i + 1].lineno > line:
            break
    if soft is None:
        raise NoMatch("no softmax call in the statement at the line")
    scores, upcast = _softmax_input(soft)
    use, drop, j = _in_place_use(st, soft), None, i
    if use is None:
        named = isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
        if not named or not (st.value is soft or _downcast_inner(st.value) is soft):
            raise NoMatch("the softmax is neither assigned to one name nor multiplied by v where it is computed")
        block.consumed.add(i)
        j, use, drop = _consumer(block, i, st.targets[0].id)
    q, (k, four_d), mask, scale = _scores(block, scores, i)
    keywords = []
    if mask:
        keywords.append(("attn_mask", _negate(mask[1]) if mask[0] == "bool" else mask[1]))
    if drop:
        keywords.append(("dropout_p", ast.parse(drop, mode="eval").body))
    keywords.append(("scale", scale if scale is not None else ast.Constant(1.0)))
    call = _functional(block, "scaled_dot_product_attention", [q, k, _matmul(use)[1]], keywords)
    notes = ["SDPA's scale is a Python number: " + (
        "the scores had none, hence scale=1.0 (SDPA's default is 1/sqrt(head dim))" if scale is None else
        f"the scores were scaled by {ast.unparse(scale)}")]
    if mask and mask[0] == "bool":
        notes.append("attn_mask is True where a query may attend: the negation of the masked_fill mask")
        made = block.resolve(mask[1], i, consume=False)[0]    # a mask named here: what made it
        if any(w in ast.unparse(m) for m in (mask[1], made) for w in ("triu", "tril", "causal")):
            notes.append("for the causal mask itself, is_causal=True (no attn_mask) picks SDPA's causal kernels")
    if four_d:
        notes.append("transpose(2, 3) is k's last two dims only when k is 4-D (batch, heads, sequence, head dim)")
    if upcast:
        notes.append("the softmax ran in float32 by hand: SDPA's kernels keep it in float32 inside and return "
                     "the inputs' dtype")
    if drop:
        notes.append("dropout moves inside SDPA: the same probability, other random draws; the sdpa trial "
                     "arm swaps only where the dropout is off (eval, or p=0)")
    return _replace(block.stmts[j], use, call), j, notes


def _unary(node, name: str):
    """x of ``x.name()`` or ``torch.name(x)``; else None."""
    if not _call(node, name) or not isinstance(node.func, ast.Attribute):
        return None
    if _is_module_name(node.func.value):
        return node.args[0] if len(node.args) == 1 else None
    return node.func.value if not node.args else None


def _square_of(node):
    """x of ``x.pow(2)``, ``torch.pow(x, 2)``, ``x ** 2``, ``x * x``, ``x.square()``; else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _number(node.right) == 2:
        return node.left
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and _same(node.left, node.right):
        return node.left
    if _call(node, "pow") and isinstance(node.func, ast.Attribute):
        method = not _is_module_name(node.func.value)
        x, e = (node.func.value, _arg(node, 0, "exponent")) if method else (_arg(node, 0, "input"),
                                                                           _arg(node, 1, "exponent"))
        return x if _number(e) == 2 else None
    return _unary(node, "square")


def _mean_square_of(node):
    """x of ``mean(x ** 2, dim=-1, keepdim=True)`` in its method or function form; else None."""
    inner = _mean_of(node)
    return _square_of(inner) if inner is not None else None


def _norm_parts(node):
    """(x, s) of ``x * rsqrt(s)``, ``rsqrt(s) * x``, ``x / sqrt(s)``; else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for x, r in ((node.left, node.right), (node.right, node.left)):
            if _unary(r, "rsqrt") is not None:
                return x, _unary(r, "rsqrt")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _unary(node.right, "sqrt") is not None:
        return node.left, _unary(node.right, "sqrt")
    return None


def _rms_of(block: Block, node, index: int):
    """(x, eps) when ``node`` is ``x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps)`` (the mean square
    possibly named in an earlier statement, then consumed; x squared as ``x.to(torch.float32)`` gives
    that as the input); else None."""
    parts = _norm_parts(node)
    if not parts or not (isinstance(parts[1], ast.BinOp) and isinstance(parts[1].op, ast.Add)):
        return None
    x, s = parts
    for ms, eps in ((s.left, s.right), (s.right, s.left)):
        value, at = block.resolve(ms, index, consume=False)
        square = _mean_square_of(value)
        upcast = _upcast_inner(square) if square is not None else None
        if square is not None and (_same(square, x) or (upcast is not None and _same(upcast, x))):
            if value is not ms:
                block.consumed.add(at)
            # T5's form squares x.to(torch.float32) and scales x: x promotes to float32 in the product,
            # so the float32 x is the op's input
            return square, eps
    return None


def _mean_of(node):
    """x of ``x.mean(-1, keepdim=True)`` / ``torch.mean(x, -1, keepdim=True)``; else None."""
    if not _call(node, "mean") or not isinstance(node.func, ast.Attribute):
        return None
    method = not _is_module_name(node.func.value)
    inner, dim = (node.func.value, _arg(node, 0, "dim")) if method else (_arg(node, 0, "input"), _arg(node, 1, "dim"))
    keep = _arg(node, 1 if method else 2, "keepdim")
    return inner if inner is not None and _number(dim) == -1 and isinstance(keep, ast.Constant) \
        and keep.value is True else None


def _biased_var(node, x, mean) -> bool:
    """``node`` is x's biased variance over the last dim: ``x.var(-1, keepdim=True, unbiased=False)``
    (or ``correction=0``), or ``((x - mean) ** 2).mean(-1, keepdim=True)``."""
    square = _mean_square_of(node)
    if square is not None:
        return isinstance(square, ast.BinOp) and isinstance(square.op, ast.Sub) and _same(square.left, x) \
            and _same(square.right, mean)
    if not _call(node, "var") or not isinstance(node.func, ast.Attribute) or _is_module_name(node.func.value):
        return False
    biased = {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg in ("unbiased", "correction")}
    keep = _arg(node, 1, "keepdim")
    return (_same(node.func.value, x) and _number(_arg(node, 0, "dim")) == -1 and biased in ({"unbiased": "False"},
            {"correction": "0"}) and isinstance(keep, ast.Constant) and keep.value is True)


def _ln_of(block: Block, node, index: int):
    """(x, eps) when ``node`` is ``(x - mean) / sqrt(var + eps)`` (or ``* rsqrt``) over the last dim,
    mean and var possibly named in earlier statements (then consumed); else None."""
    parts = _norm_parts(node)
    if not parts or not (isinstance(parts[0], ast.BinOp) and isinstance(parts[0].op, ast.Sub)) \
            or not (isinstance(parts[1], ast.BinOp) and isinstance(parts[1].op, ast.Add)):
        return None
    (x, mean), s = (parts[0].left, parts[0].right), parts[1]
    mean_value, mean_at = block.resolve(mean, index, consume=False)
    if not _same(_mean_of(mean_value) or ast.Pass(), x):
        return None
    for var, eps in ((s.left, s.right), (s.right, s.left)):
        value, at = block.resolve(var, index, consume=False)
        if _biased_var(value, x, mean):
            block.consumed.update(i for i, v, n in ((at, value, var), (mean_at, mean_value, mean)) if v is not n)
            return x, eps
    return None


def _affine(parents: dict, node):
    """(weight, bias, outermost node) of ``node * w + b`` / ``w * node`` / ``node + b`` around ``node``."""
    weight, bias, top = None, None, node
    parent = parents.get(id(top))
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult):
        weight, top = (parent.right if parent.left is top else parent.left), parent
        parent = parents.get(id(top))
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add) and parent.left is top:
        bias, top = parent.right, parent
    return weight, bias, top


def _norm(block: Block, i: int, line: int):
    """(new statement, index it replaces, notes) for an RMSNorm or LayerNorm written by hand at or
    after the mean: ``F.rms_norm`` / ``F.layer_norm`` with the weight (and bias) applied right there."""
    for k in range(i, min(i + 4, len(block.stmts))):
        st = block.stmts[k]
        parents = {id(c): p for p in ast.walk(st) for c in ast.iter_child_nodes(p)}
        for node in ast.walk(st):
            ln = _ln_of(block, node, k)     # first: a LayerNorm is also an RMSNorm of x - mean
            rms = None if ln else _rms_of(block, node, k)
            found = ln or rms
            if not found:
                continue
            x, eps = found
            weight, bias, top = _affine(parents, node)
            if rms:
                bias, top = None, (parents.get(id(node)) if weight is not None else node)
            sized = _upcast_inner(x) or x     # the shape of x.to(torch.float32) is x's
            last = ast.Subscript(ast.Attribute(sized, "shape", ast.Load()), ast.UnaryOp(ast.USub(), ast.Constant(1)),
                                 ast.Load())
            shape = ast.Tuple([last], ast.Load())
            affine = [weight] if rms else [weight, bias] if weight is not None or bias is not None else []
            affine = [a if a is not None else ast.Constant(None) for a in affine if not rms or a is not None]
            call = _functional(block, "rms_norm" if rms else "layer_norm",
                               [x, shape] + affine + ([eps] if affine else []), [] if affine else [("eps", eps)])
            notes = [f"eps ({ast.unparse(eps)}) a Python number" + ("; torch >= 2.4 for F.rms_norm" if rms else "")]
            if weight is not None or bias is not None:
                notes.append("the weight and bias of shape (d,) and the input's dtype; otherwise keep them after "
                             "the call")
            return _replace(st, top, call), k, notes
    raise NoMatch("no x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) or (x - mean) / sqrt(var + eps) over the "
                  "last dim at or just after the line")


def _module_call(node):
    """(module, x) of ``self.proj(x)``: one positional argument, no keywords; else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) and len(node.args) == 1 \
            and not node.keywords and not isinstance(node.args[0], ast.Starred):
        return node.func, node.args[0]
    return None


def _free_name(fn, base: str) -> str:
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(fn)
                                                                      if isinstance(a, ast.arg)}
    return next(f"{base}{'_' * n}" for n in range(len(used) + 1) if f"{base}{'_' * n}" not in used)


def _activation(node) -> bool:
    """A one-argument call of ``F.silu`` / ``F.gelu`` or of an activation the model holds
    (``self.act``, ``self.act_fn``, ``self.activation``: any elementwise function fits the rewrite)."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or isinstance(node.args[0], ast.Starred):
        return False
    f = node.func
    if _call(node, "silu", "gelu") and isinstance(f, ast.Attribute):
        return _is_module_name(f.value)
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name.startswith(("act", "activation"))


def _gate(block: Block, i: int, line: int):
    """([statements], index, notes) for ``act(self.g(x)) * self.u(x)`` (names of those calls followed
    back): one F.linear over the two weights concatenated, as the gate_up_fused arm measures it."""
    st = block.stmts[i]
    for node in ast.walk(st):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
            continue
        for act, up in ((node.left, node.right), (node.right, node.left)):
            if not _activation(act):
                continue
            (g_node, g_at), (u_node, u_at) = block.resolve(act.args[0], i, False), block.resolve(up, i, False)
            g, u = _module_call(g_node), _module_call(u_node)
            if not g or not u or not _same(g[1], u[1]) or _same(g[0], u[0]):
                continue
            block.consumed.update(at for at, n, was in ((g_at, g_node, act.args[0]), (u_at, u_node, up))
                                  if n is not was)
            G, U, x = ast.unparse(g[0]), ast.unparse(u[0]), ast.unparse(g[1])
            gate, upn = _free_name(block.fn, "gate"), _free_name(block.fn, "up")
            if block.torch is None:
                raise NoMatch("the module does not import torch (torch.cat)")
            cat = f"{block.torch}.cat"
            pre = ast.parse(f"{gate}, {upn} = {block.functional}.linear({x}, {cat}([{G}.weight, {U}.weight]), "
                            f"None if {G}.bias is None else {cat}([{G}.bias, {U}.bias])).chunk(2, dim=-1)").body[0]
            new_act, up_name = ast.Call(act.func, [ast.Name(gate, ast.Load())], act.keywords), ast.Name(upn, ast.Load())
            left, right = (new_act, up_name) if act is node.left else (up_name, new_act)
            mult = ast.BinOp(left, ast.Mult(), right)
            notes = [f"{G} and {U}: nn.Linear layers of one input and output size and dtype, both with a bias or "
                     "neither", "torch.cat copies both weights on every call, as the gate_up_fused arm measures; "
                     f"one nn.Linear of twice the outputs in place of {G} and {U} (its weight loaded from both) "
                     "saves that copy", "the arm measures it where the activation is F.silu or F.gelu once traced "
                     "(nn.SiLU and nn.GELU modules are)"]
            return [pre, _replace(st, node, mult)], i, notes
    raise NoMatch("no silu/gelu(self.gate(x)) * self.up(x) of one x in the statement at the line")


def _weight_t(node):
    """W of ``W.T``, ``W.mT``, ``W.t()``, ``W.transpose(0, 1)`` (a 2-D weight's transpose); else None."""
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        return node.value
    if _call(node, "t") and isinstance(node.func, ast.Attribute) and not node.args:
        return node.func.value
    if _call(node, "transpose") and isinstance(node.func, ast.Attribute) and not _is_module_name(node.func.value) \
            and {_number(d) for d in node.args} in ({0.0, 1.0}, {-1.0, -2.0}) and len(node.args) == 2:
        return node.func.value
    return None


def _projection(node):
    """(h, W, b, how) of ``F.linear(h, W[, b])``, ``h @ W.T`` (``torch.matmul``, ``.t()``, ``.transpose``)
    or ``self.head(h)`` (an nn.Linear held by the module: its weight and bias); else None."""
    if _call(node, "linear") and isinstance(node.func, ast.Attribute) and _is_module_name(node.func.value) \
            and 2 <= len(node.args) <= 3 and not node.keywords:
        return node.args[0], node.args[1], node.args[2] if len(node.args) == 3 else ast.Constant(None), None
    mm = _matmul(node)
    if mm and _weight_t(mm[1]) is not None:
        return mm[0], _weight_t(mm[1]), ast.Constant(None), None
    mod = _module_call(node)
    if mod and isinstance(mod[0], ast.Attribute) and isinstance(mod[0].value, ast.Name) and mod[0].value.id == "self":
        head = ast.unparse(mod[0])
        return (mod[1], ast.parse(f"{head}.weight", mode="eval").body, ast.parse(f"{head}.bias", mode="eval").body,
                f"{head} an nn.Linear (its weight and bias passed; a bias of None is fine)")
    return None


def _rows_view(node):
    """x of ``x.view(-1, V)`` / ``x.reshape(-1, V)`` / ``x.flatten(0, -2)`` (leading dims to rows); else None."""
    if not (_call(node, "view", "reshape", "flatten") and isinstance(node.func, ast.Attribute)):
        return None
    if node.func.attr == "flatten":
        return node.func.value if [_number(a) for a in node.args] == [0.0, -2.0] else None
    return node.func.value if len(node.args) == 2 and _number(node.args[0]) == -1.0 else None


CE_KEYWORDS = ("ignore_index", "reduction")     # what the op takes; weight, label_smoothing: left alone


def _cross_entropy(block: Block, i: int, line: int):
    """([import, statement], index, notes) for ``F.cross_entropy(projection of h[, viewed to rows], y)``:
    the chunked op ``linear_cross_entropy`` the ce_chunked arm measures, in the model's names."""
    st = block.stmts[i]
    ce = next((n for n in ast.walk(st) if _call(n, "cross_entropy") and isinstance(n.func, ast.Attribute)
               and _is_module_name(n.func.value)), None)
    if ce is None:
        raise NoMatch("no F.cross_entropy(logits, y) call in the statement at the line")
    if len(ce.args) != 2 or any(k.arg not in CE_KEYWORDS for k in ce.keywords):
        raise NoMatch("cross_entropy with a class weight, label smoothing or other arguments than "
                      "ignore_index and reduction")
    reduction = _arg(ce, 99, "reduction")
    if reduction is not None and not (isinstance(reduction, ast.Constant) and reduction.value in ("mean", "sum")):
        raise NoMatch("reduction other than 'mean' or 'sum'")
    logits = _rows_view(ce.args[0]) or ce.args[0]
    logits = block.resolve(logits, i)[0]
    found = _projection(logits)
    if found is None:
        raise NoMatch("the logits are not F.linear(h, W[, b]), h @ W.T or self.<linear>(h) at the line or "
                      "assigned just before it")
    h, w, b, how = found
    name = _free_name(block.fn, "linear_cross_entropy")
    alias = "" if name == "linear_cross_entropy" else f" as {name}"
    pre = ast.parse(f"from tko.remedies.cross_entropy_rewrite import linear_cross_entropy{alias}").body[0]
    call = ast.Call(ast.Name(name, ast.Load()), [h, w, b, ce.args[1]], ce.keywords)
    notes = ["the N x V logits are never made: chunks of rows go through projection, log-softmax and loss, and "
             "the backward's grad h and grad W are made in the forward (this package's op tko::linear_cross_entropy; "
             "Liger-Kernel's LigerFusedLinearCrossEntropyLoss is the same method)",
             "targets are class indices, one per row of h (the op flattens h's leading dims; unviewed logits "
             "must be 2-D, as F.cross_entropy reads a 3-D one's dim 1 as the classes); h, the weight and the "
             "bias of one dtype (not under autocast)",
             "memory is the gain, not speed: compare the ce_chunked arm's peak memory and step time"]
    if how:
        notes.insert(1, how)
    return [pre, _replace(st, ce, call)], i, notes


# what a caller loses when the change removes a name the function returns
RETURNED = {"attention_by_hand": "SDPA gives no attention weights",
            "large_vocab_cross_entropy": "the chunked op makes no logits"}


def _check_unread(block: Block, j: int, lost: str = "the change no longer makes it") -> None:
    """The names the change removes are read nowhere else: not between its statements, not after."""
    names = set().union(*[_stored(block.stmts[c]) for c in block.consumed if c != j]) - _stored(block.stmts[j])
    start = min(block.consumed | {j})
    for c in range(start, j):
        if c not in block.consumed and names & set(_loaded(block.stmts[c])):
            raise NoMatch(f"line {block.stmts[c].lineno} reads what the change removes")
    end = block.stmts[j].end_lineno
    late = sorted((n.lineno, n.id) for n in ast.walk(block.fn)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names and n.lineno > end)
    if late:
        returned = any(isinstance(n, ast.Return) and n.lineno == late[0][0] for n in ast.walk(block.fn))
        raise NoMatch(f"{late[0][1]} is read again at line {late[0][0]}, and the change removes it"
                      + (f" (returned: {lost}; return None there when no caller "
                         "uses them)" if returned else ""))


RULES = {"attention_by_hand": _attention, "norm_by_hand": _norm, "gated_activation": _gate,
         "large_vocab_cross_entropy": _cross_entropy}


def _block_at(stmts: list, line: int):
    """(statement list, index) of the innermost statement holding ``line``."""
    for i, st in enumerate(stmts):
        if st.lineno <= line <= st.end_lineno:
            for body in ("body", "orelse", "finalbody"):
                inner = getattr(st, body, None)
                if isinstance(inner, list) and inner and not isinstance(st, (ast.FunctionDef, ast.ClassDef)) \
                        and inner[0].lineno <= line <= inner[-1].end_lineno:
                    return _block_at(inner, line)
            return stmts, i
    return None


def propose(pattern_id: str, tree: ast.AST, lines: list[str], fn: ast.AST, line: int) -> dict | None:
    """``{"change": {start, end, before: [{line, text}], after: [text], notes}}``, or ``{"change": None,
    "change_why": reason}`` when the code at ``line`` of ``fn`` is not a form the pattern's rule
    covers; None for a pattern without a rule (its catalog template stands)."""
    rule = RULES.get(pattern_id)
    if rule is None:
        return None
    found = _block_at(fn.body, line)
    if not found:
        return {"change": None, "change_why": "the line is outside the function's statements"}
    block = Block(found[0], fn, functional_name(tree), torch=torch_name(tree))
    try:
        new, j, notes = rule(block, found[1], line)
        _check_unread(block, j, *([RETURNED[pattern_id]] if pattern_id in RETURNED else []))
    except NoMatch as exc:
        return {"change": None, "change_why": str(exc)}
    stmts = block.stmts
    start = min(block.consumed | {j})
    first, last = stmts[start].lineno, stmts[j].end_lineno
    replaced = [(stmts[c].lineno, stmts[c].end_lineno) for c in block.consumed | {j}]
    if any(st.lineno <= b and a <= st.end_lineno for c, st in enumerate(stmts) if c not in block.consumed | {j}
           for a, b in replaced):
        return {"change": None, "change_why": "a statement the change keeps shares a line with it (;)"}
    kept = [lines[n - 1] for c in range(start, j) if c not in block.consumed
            for n in range(stmts[c].lineno, stmts[c].end_lineno + 1)]
    indent = lines[stmts[j].lineno - 1][:stmts[j].col_offset]    # the file's own indent (tabs kept)
    after = kept + [indent + text for st in (new if isinstance(new, list) else [new])
                    for text in ast.unparse(st).splitlines()]
    try:     # the changed file must still parse (a proposal is never a broken file)
        ast.parse("\n".join(lines[:first - 1] + after + lines[last:]))
    except (SyntaxError, ValueError) as exc:
        return {"change": None, "change_why": f"the changed file would not parse ({exc.__class__.__name__})"}
    return {"change": {"start": first, "end": last, "after": after, "notes": notes,
                       "before": [{"line": n, "text": lines[n - 1]} for n in range(first, last + 1)]}}


LIBRARY_ADVICE = {
    ("transformers", "attention_by_hand"):
        "a transformers model's eager attention: load the model with attn_implementation=\"sdpa\" "
        "(from_pretrained, or config._attn_implementation) instead of editing the library",
    ("transformers", "norm_by_hand"):
        "a transformers model's RMSNorm: swap it without editing the library (Liger-Kernel's "
        "apply_liger_kernel_to_<model>(rms_norm=True), or a subclass with F.rms_norm set on the model)",
    ("transformers", "large_vocab_cross_entropy"):
        "a transformers model's loss over the LM head's logits: swap it without editing the library "
        "(Liger-Kernel's apply_liger_kernel_to_<model>(fused_linear_cross_entropy=True) never makes the logits)",
}


def library_advice(pattern_id: str, path) -> str | None:
    """How to make the change where the code is an installed package's (under site-packages or
    dist-packages), not the user's: the package's own switch where one is known; else None."""
    parts = tuple(getattr(path, "parts", ()))
    pairs = set(zip(parts, parts[1:]))
    known = next((text for (lib, pid), text in LIBRARY_ADVICE.items()
                  if pid == pattern_id and (lib, "models") in pairs), None)
    if known or not {"site-packages", "dist-packages"} & set(parts):
        return known
    return ("an installed package's file: make the change in your program (a subclass of the module, or the "
            "function swapped at import), not by editing the package")
