"""Big graphs and big source files in bounded answers (docs/routes.md: graphs/graph_info pages,
graphs/neighborhood, graphs/overview, graphs/search, source_files/file line ranges,
source_files/op_lines), through the plugin's WSGI app on dumps written by the real writer: a
graph of 6,100 kernels in layers whose ops were created at lines of a million-line file, with a
call whose op 1000 made a NaN, an 8 MiB file with a 4 MiB line, and the small NaN chain of the
plugin tests. Each answer is checked against the whole (graph pages, a breadth-first walk done
here, edges counted here, the files' own lines) and its size against its bound."""

from __future__ import annotations

import collections

import pytest
from big_dumps import LAYER_OPS, write_big_graph, write_sources
from plugin_dumps import write_nan_chain
from test_plugin import Server

from tvmdbg_tb.analysis.graph_views import MAX_GRAPH_PAGE, MAX_OPS_PER_LINE
from tvmdbg_tb.analysis.views import MAX_LINE_CHARS, MAX_PAGE_CHARS, MAX_SOURCE_PAGE
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb

NUM_OPS = MAX_GRAPH_PAGE + 1100


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("pages")
    sources = write_sources(tmp_path_factory.mktemp("sources"))
    big = write_big_graph(logdir, NUM_OPS, sources)
    write_nan_chain(logdir, "chain")
    server = Server(logdir)
    yield server, big, sources
    server.plugin.stop()


def whole_graph(server, run: str) -> dict:
    """Every op and edge of graph 0, page by page."""
    first = server.json("graphs/graph_info", run=run, graph_id=0, begin=0, end=MAX_GRAPH_PAGE)
    second = server.json("graphs/graph_info", run=run, graph_id=0, begin=MAX_GRAPH_PAGE, end=-1)
    return {"ops": first["ops"] + second["ops"], "edges": first["edges"] + second["edges"]}


def test_graph_info_comes_in_pages_that_make_the_whole(dump):
    server, big, _ = dump
    run = big["run"]
    refused = server.json("graphs/graph_info", 400, run=run, graph_id=0)
    assert "graphs/neighborhood" in refused["error"] and str(NUM_OPS) in refused["error"]
    server.json("graphs/graph_info", 400, run=run, graph_id=0, begin=0, end=MAX_GRAPH_PAGE + 1)
    page = server.get("graphs/graph_info", run=run, graph_id=0, offset=100, limit=50)
    body = page.get_json()
    assert (body["begin"], body["end"], body["num_ops"]) == (100, 150, NUM_OPS)
    assert [o["op_id"] for o in body["ops"]] == list(range(100, 150))
    assert {e["dst_op_id"] for e in body["edges"]} == set(range(100, 150))
    whole = whole_graph(server, run)
    assert [o["op_id"] for o in whole["ops"]] == list(range(NUM_OPS))
    # A small graph still comes whole without a range.
    chain = server.json("graphs/graph_info", run="chain", graph_id=0)
    assert len(chain["ops"]) == chain["num_ops"] == 4 and (chain["begin"], chain["end"]) == (0, 4)
    server.json("graphs/graph_info", 404, run="chain", graph_id=9)


def bfs(edges: list[dict], center: int, depth: int) -> dict[int, int]:
    """Distances of the ops within depth of center, over op-to-op edges both ways."""
    near = collections.defaultdict(set)
    for e in edges:
        if e["src_op_id"] is not None:
            near[e["src_op_id"]].add(e["dst_op_id"])
            near[e["dst_op_id"]].add(e["src_op_id"])
    distance = {center: 0}
    layer = [center]
    for d in range(1, depth + 1):
        layer = [n for op in layer for n in near[op] if n not in distance and not distance.setdefault(n, d) < d]
    return distance


def test_neighborhood_is_a_bounded_breadth_first_walk_with_health(dump):
    server, big, _ = dump
    run = big["run"]
    whole = whole_graph(server, run)
    center = big["bad_op"]
    answer = server.json("graphs/neighborhood", run=run, op_id=center, depth=3, max_ops=500, execution_index=0)
    expected = bfs(whole["edges"], center, 3)
    got = {o["op_id"]: o["distance"] for o in answer["ops"]}
    assert got == expected and answer["ops"][0]["op_id"] == center and not answer["whole"]
    assert [o["distance"] for o in answer["ops"]] == sorted(got.values())  # nearest first
    shown = set(got)
    outside = {
        op
        for e in whole["edges"]
        if e["src_op_id"] is not None
        for op, other in ((e["src_op_id"], e["dst_op_id"]), (e["dst_op_id"], e["src_op_id"]))
        if op in shown and other not in shown
    }
    assert set(answer["frontier"]) == outside and outside
    assert all(e["src_op_id"] in shown for e in answer["edges"] if e["src_op_id"] is not None)
    # Health in the call: the traced ops' own traces (the bad op and those after it hold NaN).
    for op_id in shown:
        row = answer["health"].get(str(op_id))
        assert row is not None and row["op_id"] == op_id and row["execution_index"] == 0
        assert (row["nan"] > 0) == (op_id >= big["bad_op"])
    # Capped: at most max_ops, the nearest ones.
    capped = server.json("graphs/neighborhood", run=run, op_id=center, depth=50, max_ops=7)
    assert [o["distance"] for o in capped["ops"]] == sorted(bfs(whole["edges"], center, 50).values())[:7]
    server.json("graphs/neighborhood", 400, run=run, op_id=center, max_ops=100_000)
    server.json("graphs/neighborhood", 404, run=run, op_id=NUM_OPS + 5)
    # A graph no larger than max_ops comes whole, with the parameters it reads and their health.
    small = server.json("graphs/neighborhood", run="chain", op_id=1, execution_index=3)
    assert small["whole"] and sorted(o["op_id"] for o in small["ops"]) == [0, 1, 2, 3]
    assert [p["name"] for p in small["params"]] == ["x", "w"] and small["frontier"] == []
    assert small["param_health"]["0"]["summary"]["nan"] == 32  # call 3 got a NaN x
    assert small["param_health"]["1"]["summary"]["nan"] == 0


def test_overview_folds_consecutive_ops_and_counts_edges_between_groups(dump):
    server, big, _ = dump
    run = big["run"]
    whole = whole_graph(server, run)
    answer = server.json("graphs/overview", run=run, graph_id=0, max_groups=40, execution_index=0)
    groups = answer["groups"]
    assert len(groups) <= 40 and groups[0]["begin"] == 0 and groups[-1]["end"] == NUM_OPS
    assert all(a["end"] == b["begin"] for a, b in zip(groups, groups[1:]))
    size = answer["group_size"]
    group_of = {o["op_id"]: k // size for k, o in enumerate(whole["ops"])}
    counted = collections.Counter(
        (group_of[e["src_op_id"]], group_of[e["dst_op_id"]])
        for e in whole["edges"]
        if e["src_op_id"] is not None and group_of[e["src_op_id"]] != group_of[e["dst_op_id"]]
    )
    assert {(e["src"], e["dst"]): e["count"] for e in answer["edges"]} == dict(counted)
    assert groups[0]["op_types"][0]["count"] == -(-size // LAYER_OPS)  # the commonest type, counted
    assert groups[1]["first_op"]["op_id"] == size and groups[1]["first_location"]["line"] == size + 1
    assert sum(g["nonfinite_ops"] for g in groups) == big["traced"] - big["bad_op"]
    assert sum(g["traced_ops"] for g in groups) == big["traced"]
    # A range of the graph, folded again (what a click on a group opens).
    inner = server.json("graphs/overview", run=run, graph_id=0, begin=size, end=2 * size, max_groups=1000)
    assert [g["num_ops"] for g in inner["groups"]] == [1] * size and inner["group_size"] == 1
    inside = [e for e in whole["edges"] if e["src_op_id"] is not None and size <= e["src_op_id"] < 2 * size]
    assert len(inner["edges"]) == sum(1 for e in inside if e["dst_op_id"] < 2 * size)
    server.json("graphs/overview", 400, run=run, graph_id=0, max_groups=5000)


@pytest.fixture(scope="module")
def searchable(tmp_path_factory):
    """Four ops like a model's: a subtract, a fused log+multiply, a matmul, an ONNX conv."""
    logdir = tmp_path_factory.mktemp("search")
    w = DebugEventsWriter(
        str(logdir), DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id="s"
    )
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main", executable_id="e"))
    loc = lambda line: w.code_location([(__file__, line, "forward")], user_frame_index=0)  # noqa: E731
    specs = [
        ("lv", "subtract", [("relax.subtract", 10)], None),
        ("lv1", "fused_log_multiply", [("relax.log", 11), ("relax.multiply", 12)], None),
        ("lv12", "matmul", [("relax.matmul", 13)], None),
        ("gv", "conv2d", [("relax.nn.conv2d", None)], "/layer1/conv/Conv"),
    ]
    for op_id, (name, kernel, types, node) in enumerate(specs):
        originals = []
        for k, (op_type, line) in enumerate(types):
            where = loc(line) if line else pb.CodeLocation()
            if node:
                where.model_node.CopyFrom(pb.ModelNode(format="onnx", name=node, op_type="Conv"))
            originals.append(pb.OriginalOp(op_type=op_type, var_name=f"{name}_{k}", code_location=where))
        op = pb.GraphOpCreation(op_id=op_id, graph_id=0, op_name=name, kernel=kernel, original_ops=originals)
        op.code_location.CopyFrom(originals[0].code_location)
        w.write_graph_op_creation(op)
    w.close()
    server = Server(logdir)
    yield server
    server.plugin.stop()


def found(server, q: str, **extra) -> list[str]:
    return [m["op"]["op_name"] for m in server.json("graphs/search", run="s", q=q, **extra)["matches"]]


def test_search_ranks_names_kernels_op_types_nodes_and_lines(searchable):
    assert found(searchable, "lv1") == ["lv1", "lv12"]  # exact name before a prefix
    for q in ("relax.log", "log", "LOG"):
        answer = searchable.json("graphs/search", run="s", q=q)
        assert answer["matches"][0]["op"]["op_name"] == "lv1" and "op type relax.log" in answer["matches"][0]["why"]
    assert found(searchable, "test_graph_pages.py:12") == ["lv1"]
    assert found(searchable, ":13") == ["lv12"]
    assert found(searchable, "other.py:13") == []
    assert found(searchable, "matmul")[0] == "lv12"
    assert found(searchable, "  ") == []
    assert found(searchable, "/layer1/conv/Conv") == ["gv"] and found(searchable, "layer1/conv") == ["gv"]
    answer = searchable.json("graphs/search", run="s", q="lv", limit=2)
    assert answer["num_matches"] == 3 and len(answer["matches"]) == 2
    assert answer["matches"][0]["graph_name"] == "main"
    searchable.json("graphs/search", 400, run="s", q="x" * 1001)
    searchable.json("graphs/search", 400, run="s", q="lv", limit=500)


def test_source_files_come_in_line_ranges_with_long_lines_cut(dump):
    server, big, sources = dump
    run = big["run"]
    files = {f["file_path"]: f for f in server.json("source_files/list", run=run)["source_files"]}
    long = files[str(sources["long"])]
    assert long["num_lines"] == 1_000_000
    server.json("source_files/file", 400, run=run, index=long["index"])  # a million lines: page it
    tail = server.json("source_files/file", run=run, index=long["index"], begin=999_990, end=-1)
    assert tail["lines"] == [f"y{i}" for i in range(999_990, 1_000_000)] and tail["end"] == 1_000_000
    page = server.json("source_files/file", run=run, index=long["index"], offset=500_000, limit=MAX_SOURCE_PAGE)
    assert page["lines"][0] == "y500000" and len(page["lines"]) == MAX_SOURCE_PAGE and page["clipped"] == []
    wide = files[str(sources["wide"])]
    text = sources["wide"].read_text().split("\n")
    at = next(i for i, line in enumerate(text) if len(line) > MAX_LINE_CHARS)
    body = server.json("source_files/file", run=run, index=wide["index"], begin=at - 5, end=at + 9)
    assert body["clipped"] == [{"line": at + 1, "length": len(text[at])}]
    assert body["lines"][5] == text[at][:MAX_LINE_CHARS] and body["lines"][:5] == text[at - 5 : at]
    assert body["lines"][6:] == text[at + 1 : at + 9] and body["end"] == at + 9
    # Long lines: the page stops before its text passes the bound; the next goes on from `end`.
    first_long = next(i for i, line in enumerate(text) if len(line) > 1000)
    response = server.get("source_files/file", run=run, index=wide["index"], begin=first_long, end=first_long + 300)
    body = response.get_json()
    assert body["begin"] + len(body["lines"]) == body["end"] < first_long + 300
    assert body["lines"] == text[first_long : body["end"]]
    assert MAX_PAGE_CHARS - 10_000 < len(response.get_data()) < MAX_PAGE_CHARS + 4096
    more = server.json("source_files/file", run=run, index=wide["index"], begin=body["end"], end=body["end"] + 3)
    assert more["lines"] == text[body["end"] : body["end"] + 3]


def test_op_lines_name_the_ops_each_line_created(dump):
    server, big, sources = dump
    run = big["run"]
    files = {f["file_path"]: f["index"] for f in server.json("source_files/list", run=run)["source_files"]}
    answer = server.json("source_files/op_lines", run=run, index=files[str(sources["long"])], begin=99, end=104)
    # Op k was created at line k + 1 of the long file.
    assert [(x["line"], x["num_ops"], [o["op_id"] for o in x["ops"]]) for x in answer["lines"]] == [
        (line, 1, [line - 1]) for line in range(100, 105)
    ]
    server.json("source_files/op_lines", 400, run=run, index=files[str(sources["long"])], begin=0, end=-1)
    # The chain's fused op lists both of its lines; a line of many ops lists the first ones.
    chain = server.json("source_files/op_lines", run="chain", index=0)
    assert {x["line"]: [o["op_name"] for o in x["ops"]] for x in chain["lines"]} == {
        20: ["lv0"],
        21: ["lv1"],
        22: ["lv2"],
        23: ["lv3"],
        40: ["lv1"],
    }
    assert MAX_OPS_PER_LINE >= 10


def test_op_info_and_op_traces_of_one_call(dump):
    server, _, _ = dump
    info = server.json("graphs/op_info", run="chain", op_id=1, execution_index=2)
    assert info["num_consumers"] == 1 and info["execution_index"] == 2
    health = info["health"]
    assert set(health) == {"0", "1", "2"} and all(h["execution_index"] == 2 for h in health.values())
    assert health["0"]["nan"] == 0 and health["1"]["nan"] == 32  # the producer finite, the op NaN
    traces = server.json("graph_execution/op_traces", run="chain", op_id=1, execution_index=2)
    assert traces["num_traces"] == 1 and traces["traces"][0]["execution_index"] == 2
