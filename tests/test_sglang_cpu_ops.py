"""The project's sgl_kernel CPU ops (fixtures/sglang_cpu_ops) against independent references.

Attention is checked against dense softmax attention over contiguous K/V (torch's
scaled_dot_product_attention), after scattering the same K/V into a paged pool in a shuffled slot
order; the EAGLE ops against trees worked out by hand. Each test fails on the obvious mistakes:
an off-by-one causal mask, a prefix read from the wrong slots, a child list in the wrong order.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fixtures.sglang_cpu_ops import attention, layers, memory, speculative  # noqa: E402
from fixtures.sglang_cpu_ops.registry import OPS, _core_count, register  # noqa: E402

HEADS, KV_HEADS, DIM = 4, 2, 8


def paged_pool(lengths: list[int], seed: int = 0):
    """Random K/V for requests of `lengths` tokens, scattered into a pool at shuffled slots."""
    generator = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    slots = torch.randperm(total + 7, generator=generator)[:total]
    k_buffer = torch.zeros(total + 7, KV_HEADS, DIM)
    v_buffer = torch.zeros(total + 7, KV_HEADS, DIM)
    req_to_token = torch.zeros(len(lengths) + 1, max(lengths) + 4, dtype=torch.int32)
    dense = []
    used = 0
    for row, length in enumerate(lengths):
        keys = torch.randn(length, KV_HEADS, DIM, generator=generator)
        values = torch.randn(length, KV_HEADS, DIM, generator=generator)
        mine = slots[used:used + length]
        k_buffer[mine], v_buffer[mine] = keys, values
        req_to_token[row + 1, :length] = mine.int()  # row 0 unused: pool indices are not batch indices
        dense.append((keys, values))
        used += length
    return k_buffer, v_buffer, req_to_token, dense


def dense_attention(q, keys, values, causal_offset: int | None):
    """Reference: SDPA over contiguous keys; query i sees keys [0, causal_offset + i]."""
    keys = keys.repeat_interleave(HEADS // KV_HEADS, dim=1).transpose(0, 1)
    values = values.repeat_interleave(HEADS // KV_HEADS, dim=1).transpose(0, 1)
    mask = None
    if causal_offset is not None:
        mask = torch.arange(keys.shape[1]).unsqueeze(0) <= causal_offset + torch.arange(q.shape[0]).unsqueeze(1)
    out = torch.nn.functional.scaled_dot_product_attention(q.transpose(0, 1), keys, values, attn_mask=mask, scale=DIM ** -0.5)
    return out.transpose(0, 1)


def test_extend_attention_equals_dense_causal_attention():
    lengths, extends = [9, 5], [4, 5]  # request 0 has a 5-token prefix; request 1 is a fresh prefill
    k_buffer, v_buffer, req_to_token, dense = paged_pool(lengths)
    q = torch.randn(sum(extends), HEADS, DIM, generator=torch.Generator().manual_seed(1))
    out = torch.zeros_like(q)
    attention.extend_attention(q, None, None, out, k_buffer, v_buffer, 1.0, 1.0, req_to_token, torch.tensor([1, 2]),
                               torch.tensor(lengths), torch.tensor(extends), torch.tensor([0, 4]), 5, DIM ** -0.5, 0.0,
                               False, 0, None, None, None, True)
    expected = torch.cat([dense_attention(q[:4], *dense[0], causal_offset=5), dense_attention(q[4:], *dense[1], causal_offset=0)])
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_extend_attention_takes_the_new_tokens_kv_from_the_arguments():
    """With k_extend/v_extend given, the extend tokens' K/V come from them, not from the pool."""
    lengths = [6]
    k_buffer, v_buffer, req_to_token, dense = paged_pool(lengths)
    keys, values = dense[0]
    slots = req_to_token[1, 3:6].long()
    k_buffer[slots] = 0.0  # the pool does not hold the new tokens yet
    v_buffer[slots] = 0.0
    q = torch.randn(3, HEADS, DIM)
    out = torch.zeros_like(q)
    attention.extend_attention(q, keys[3:], values[3:], out, k_buffer, v_buffer, 1.0, 1.0, req_to_token, torch.tensor([1]),
                               torch.tensor([6]), torch.tensor([3]), torch.tensor([0]), 3, DIM ** -0.5, 0.0, False, 0, None, None,
                               None, True)
    torch.testing.assert_close(out, dense_attention(q, keys, values, causal_offset=3), rtol=1e-5, atol=1e-5)


def test_decode_attention_writes_the_new_token_then_attends_to_all():
    lengths = [7, 3]
    k_buffer, v_buffer, req_to_token, dense = paged_pool(lengths)
    new_k, new_v = torch.randn(2, KV_HEADS, DIM), torch.randn(2, KV_HEADS, DIM)
    loc = torch.stack([req_to_token[1, 6], req_to_token[2, 2]]).long()  # the last slot of each request is the new token's
    q = torch.randn(2, HEADS, DIM)
    out = torch.zeros_like(q)
    attention.decode_attention(q, k_buffer, v_buffer, 1.0, 1.0, out, new_k, new_v, loc, torch.zeros(2, HEADS, 8, DIM + 1),
                               req_to_token, torch.tensor([1, 2]), torch.tensor(lengths), DIM ** -0.5, 0.0, False, 0, None, None)
    for row in range(2):
        keys, values = dense[row]
        keys, values = keys.clone(), values.clone()
        keys[-1], values[-1] = new_k[row], new_v[row]
        torch.testing.assert_close(out[row:row + 1], dense_attention(q[row:row + 1], keys, values, causal_offset=None), rtol=1e-5, atol=1e-5)


def chain_tree(seq_lens: list[int], nodes: int):
    """Outputs of build_tree for a chain draft (topk 1): node i's parent is node i - 1."""
    bs = len(seq_lens)
    # SGLang's layout for topk 1 (organize_draft_results): one score per step, so the drafts are scores
    # 0, 1, 2, ...; parent slot j stands for score j - 1 (slot 0, the root, is -1).
    parent_list = torch.arange(-1, nodes - 2).repeat(bs, 1)
    selected = torch.arange(0, nodes - 1).repeat(bs, 1)
    mask = torch.ones(sum(seq_lens) * nodes + bs * nodes * nodes, dtype=torch.bool)
    positions = torch.zeros(bs * nodes, dtype=torch.int64)
    retrieve = [torch.full((bs, nodes), -1, dtype=torch.int64) for _ in range(3)]
    speculative.build_tree_kernel_efficient(parent_list, selected, torch.tensor(seq_lens), mask, positions, *retrieve, 1, nodes - 1,
                                            nodes, speculative.FULL_MASK)
    return mask, positions, retrieve


def test_chain_tree_positions_links_and_mask():
    mask, positions, (index, next_token, next_sibling) = chain_tree([5, 2], nodes=4)
    assert positions.tolist() == [5, 6, 7, 8, 2, 3, 4, 5]
    assert index.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert next_token.tolist() == [[1, 2, 3, -1], [1, 2, 3, -1]]
    assert next_sibling.tolist() == [[-1] * 4, [-1] * 4]
    # Request 0's rows span 5 + 4 keys: the prefix stays visible, the draft part is lower-triangular.
    rows = mask[:4 * 9].view(4, 9)
    assert rows[:, :5].all()
    assert rows[:, 5:].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    rows1 = mask[4 * 9:4 * 9 + 4 * 6].view(4, 6)
    assert rows1[:, 2:].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]


def test_branching_tree_links_children_in_node_order():
    """topk 2, one step: nodes 1 and 2 are both children of the root, so the root's list is 1 -> 2."""
    parent_list = torch.tensor([[-1, 0, 1]])
    selected = torch.tensor([[0, 1]])  # slots 0 and 1 // topk 2 == 0: both hang off the root
    mask = torch.ones(3 * 3 + 3 * 3, dtype=torch.bool)
    positions = torch.zeros(3, dtype=torch.int64)
    retrieve = [torch.full((1, 3), -1, dtype=torch.int64) for _ in range(3)]
    speculative.build_tree_kernel_efficient(parent_list, selected, torch.tensor([3]), mask, positions, *retrieve, 2, 1, 3,
                                            speculative.FULL_MASK)
    assert positions.tolist() == [3, 4, 4]
    assert retrieve[1].tolist() == [[1, -1, -1]]
    assert retrieve[2].tolist() == [[-1, 2, -1]]
    assert mask.view(3, 6)[:, 3:].int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 0, 1]]  # siblings do not see each other


def test_greedy_verify_accepts_the_matching_prefix_and_the_bonus():
    _, _, (index, next_token, next_sibling) = chain_tree([5], nodes=4)
    candidates = torch.tensor([[100, 11, 12, 99]])  # node 0 is the verified token; drafts 11, 12, 99
    target = torch.tensor([[11, 12, 13, 14]])  # target argmax after each node: accepts 11 and 12, rejects 99
    predicts = torch.full((4,), -1, dtype=torch.int64)
    accept_index = torch.full((1, 4), -1, dtype=torch.int64)
    accept_num = torch.zeros(1, dtype=torch.int64)
    speculative.verify_tree_greedy(predicts, accept_index, accept_num, candidates, index, next_token, next_sibling, target)
    assert accept_num.tolist() == [2]
    assert accept_index.tolist() == [[0, 1, 2, -1]]
    assert predicts.tolist() == [11, 12, 13, -1]  # 13 is the bonus token: the target's choice after node 2


def test_greedy_verify_searches_siblings():
    candidates = torch.tensor([[100, 7, 8]])
    next_token, next_sibling = torch.tensor([[1, -1, -1]]), torch.tensor([[-1, 2, -1]])
    index = torch.tensor([[0, 1, 2]])
    target = torch.tensor([[8, 5, 6]])  # the root's argmax is 8: the second child
    predicts = torch.full((3,), -1, dtype=torch.int64)
    accept_index = torch.full((1, 2), -1, dtype=torch.int64)
    accept_num = torch.zeros(1, dtype=torch.int64)
    speculative.verify_tree_greedy(predicts, accept_index, accept_num, candidates, index, next_token, next_sibling, target)
    assert accept_index.tolist() == [[0, 2]] and predicts.tolist() == [8, -1, 6]


def test_cache_location_ops():
    req_to_token = torch.arange(40, dtype=torch.int32).view(4, 10)
    out = torch.zeros(6, dtype=torch.int64)
    speculative.assign_extend_cache_locs(torch.tensor([2, 1]), req_to_token, torch.tensor([3, 0]), torch.tensor([5, 4]), out, 10)
    assert out.tolist() == [23, 24, 10, 11, 12, 13]
    draft = torch.zeros(6, dtype=torch.int64)
    speculative.assign_draft_cache_locs_contiguous(torch.tensor([1, 3]), req_to_token, torch.tensor([2, 5]), draft, 10, 1, 3)
    assert draft.tolist() == [12, 13, 14, 35, 36, 37]
    table = torch.zeros(3, 8, dtype=torch.int32)
    memory.assign_req_to_token_pool(torch.tensor([2, 0]), table, torch.tensor([1, 4]), torch.tensor([3, 6]), torch.tensor([7, 8, 9, 10]), 8)
    assert table[2, 1:3].tolist() == [7, 8] and table[0, 4:6].tolist() == [9, 10]
    bonus = torch.zeros(2, dtype=torch.int64)
    speculative.fill_bonus_tokens(torch.tensor([[5, 6, 7], [8, 9, 10]]), torch.tensor([2, 3]), bonus, 3)
    assert bonus.tolist() == [6, 10]


def test_copy_all_layer_kv_cache_moves_whole_slots_in_every_buffer():
    buffers = [torch.arange(24, dtype=torch.float32).view(6, 2, 2).clone() for _ in range(3)]
    pointers = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.uint64)
    strides = torch.tensor([b.stride(0) * b.element_size() for b in buffers])
    memory.copy_all_layer_kv_cache(pointers, strides, torch.tensor([0, 5]), torch.tensor([5, 0]))  # a swap: reads before writes
    for buffer in buffers:
        assert buffer[0].flatten().tolist() == [20.0, 21.0, 22.0, 23.0] and buffer[5].flatten().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_norm_rotary_and_activation_match_their_formulas():
    x, weight = torch.randn(3, 16), torch.randn(16)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
    torch.testing.assert_close(layers.rmsnorm(x, weight, 1e-6), expected)
    residual = torch.randn(3, 16)
    x2, r2 = x.clone(), residual.clone()
    layers.fused_add_rmsnorm(x2, r2, weight, 1e-6)
    torch.testing.assert_close(r2, x + residual)
    torch.testing.assert_close(x2, layers.rmsnorm(x + residual, weight, 1e-6))
    gate_up = torch.randn(2, 8)
    torch.testing.assert_close(layers.silu_and_mul(gate_up), torch.nn.functional.silu(gate_up[:, :4]) * gate_up[:, 4:])
    # Rotary (neox halves) at position p rotates each (x_i, x_{i+d/2}) pair by angle p * theta_i.
    head = 4
    cache = torch.cat([torch.cos(torch.tensor([[0.0, 0.0], [0.5, 0.25]])), torch.sin(torch.tensor([[0.0, 0.0], [0.5, 0.25]]))], dim=-1)
    q = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    rotated, _ = layers.rotary_embedding(torch.tensor([1]), q, q.clone(), head, cache, True)
    c, s = torch.cos(torch.tensor([0.5, 0.25])), torch.sin(torch.tensor([0.5, 0.25]))
    torch.testing.assert_close(rotated[0], torch.stack([c[0], -s[1], s[0], c[1]]))


def test_registration_offers_every_op_through_torch_ops():
    register()
    register()  # once per process, however often called
    for op in OPS:
        assert hasattr(torch.ops.sgl_kernel, op.name), op.name
    assert torch.ops.sgl_kernel.init_cpu_threads_env("0-1").endswith("2 cores")
    assert _core_count("0-3,8") == 5
