"""Generate the explicit layer lists in ``workloads/*.toml`` (run once; the TOMLs are committed).

    python scripts/workload_generate.py            # rewrites workloads/{resnet50,bert-base,tiny-cnn,digits-cnn}.toml
    python scripts/workload_generate.py --check    # exit 1 if a committed TOML differs

The TOML files stay explicit (one [[layer]] table per layer, no generators inside TOML) so that a
reader can audit every shape; this script only saves typing. Shapes follow:

* ResNet-50: torchvision ``resnet50`` (v1.5: stride on the 3x3 conv of each bottleneck),
  224x224 ImageNet input, padding as in torchvision; 25,557,032 parameters.
* BERT-base: HuggingFace ``BertModel`` (bert-base-uncased: 12 layers, hidden 768, 12 heads,
  FFN 3072, vocab 30522, 512 positions, 2 token types, with pooler), sequence length 128
  (pre-training phase 1); 109,482,240 parameters. Dropout and the attention-mask add are not
  modelled (element-wise, small).
* tiny-cnn: a 2-conv network small enough to check by hand in tests.
* digits-cnn: ``accelsim.train.models.cnn(8, 8, 10)`` (the ``study --model cnn --dataset digits``
  network: width 8, one residual block with a 1x1 shortcut, BatchNorm, 2x2 average pool, a linear
  head), every shape from that function; 6,338 parameters (its parameters() count).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _render(meta: dict, layers: list[dict], header: str) -> str:
    out = [header.rstrip(), "", "[workload]"]
    out += [f"{k} = {_fmt(v)}" for k, v in meta.items()]
    for layer in layers:
        out += ["", "[[layer]]"]
        out += [f"{k} = {_fmt(v)}" for k, v in layer.items()]
    return "\n".join(out) + "\n"


def _out(size: int, k: int, s: int, p: int) -> int:
    return (size + 2 * p - k) // s + 1


def resnet50() -> tuple[dict, list[dict]]:
    L: list[dict] = []

    def conv(name, cin, cout, hw, k, s, p):
        L.append(dict(name=name, kind="conv", in_channels=cin, out_channels=cout, in_hw=[hw, hw],
                      kernel=[k, k], stride=[s, s], padding=[p, p]))
        return _out(hw, k, s, p)

    def bn(name, c, hw):
        L.append(dict(name=name, kind="batchnorm", shape=[c, hw, hw]))

    def relu(name, c, hw):
        L.append(dict(name=name, kind="relu", shape=[c, hw, hw]))

    hw = conv("conv1", 3, 64, 224, 7, 2, 3)
    bn("bn1", 64, hw)
    relu("relu", 64, hw)
    L.append(dict(name="maxpool", kind="maxpool", shape=[64, hw, hw], kernel=[3, 3],
                  stride=[2, 2], padding=[1, 1]))
    hw = _out(hw, 3, 2, 1)
    cin = 64
    for stage, (planes, blocks, stride) in enumerate(
            [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            pre = f"layer{stage}.{b}"
            conv(f"{pre}.conv1", cin, planes, hw, 1, 1, 0)
            bn(f"{pre}.bn1", planes, hw)
            relu(f"{pre}.relu1", planes, hw)
            out_hw = conv(f"{pre}.conv2", planes, planes, hw, 3, s, 1)
            bn(f"{pre}.bn2", planes, out_hw)
            relu(f"{pre}.relu2", planes, out_hw)
            conv(f"{pre}.conv3", planes, 4 * planes, out_hw, 1, 1, 0)
            bn(f"{pre}.bn3", 4 * planes, out_hw)
            if b == 0:
                conv(f"{pre}.downsample.0", cin, 4 * planes, hw, 1, s, 0)
                bn(f"{pre}.downsample.1", 4 * planes, out_hw)
            L.append(dict(name=f"{pre}.add", kind="add", shape=[4 * planes, out_hw, out_hw]))
            relu(f"{pre}.relu3", 4 * planes, out_hw)
            cin, hw = 4 * planes, out_hw
    L.append(dict(name="avgpool", kind="avgpool", shape=[cin, hw, hw], kernel=[hw, hw],
                  stride=[1, 1]))
    L.append(dict(name="fc", kind="linear", in_features=cin, out_features=1000, bias=True))
    L.append(dict(name="loss.softmax", kind="softmax", shape=[1000]))
    meta = dict(name="resnet50",
                description="ResNet-50 (torchvision v1.5), ImageNet 224x224, training with "
                            "softmax cross-entropy loss",
                source="torchvision.models.resnet50 layer shapes (He et al. 2016, "
                       "torchvision v1.5 bottleneck stride on the 3x3 conv)",
                published_params=25557032)
    return meta, L


def bert_base(seq: int = 128) -> tuple[dict, list[dict]]:
    H, A, F, V, P, T = 768, 12, 3072, 30522, 512, 2
    d = H // A
    L: list[dict] = [
        dict(name="embeddings.word_embeddings", kind="embedding", vocab=V, dim=H, tokens=seq),
        dict(name="embeddings.position_embeddings", kind="embedding", vocab=P, dim=H, tokens=seq),
        dict(name="embeddings.token_type_embeddings", kind="embedding", vocab=T, dim=H,
             tokens=seq),
        dict(name="embeddings.add_position", kind="add", shape=[seq, H]),
        dict(name="embeddings.add_token_type", kind="add", shape=[seq, H]),
        dict(name="embeddings.LayerNorm", kind="layernorm", shape=[seq, H]),
    ]
    for i in range(12):
        p = f"encoder.layer.{i}"
        for proj in ("query", "key", "value"):
            L.append(dict(name=f"{p}.attention.self.{proj}", kind="linear", in_features=H,
                          out_features=H, tokens=seq))
        L.append(dict(name=f"{p}.attention.self.scores", kind="matmul", m=seq, n=seq, k=d,
                      count=A))
        L.append(dict(name=f"{p}.attention.self.softmax", kind="softmax", shape=[A, seq, seq]))
        L.append(dict(name=f"{p}.attention.self.context", kind="matmul", m=seq, n=d, k=seq,
                      count=A))
        L.append(dict(name=f"{p}.attention.output.dense", kind="linear", in_features=H,
                      out_features=H, tokens=seq))
        L.append(dict(name=f"{p}.attention.output.add", kind="add", shape=[seq, H]))
        L.append(dict(name=f"{p}.attention.output.LayerNorm", kind="layernorm", shape=[seq, H]))
        L.append(dict(name=f"{p}.intermediate.dense", kind="linear", in_features=H,
                      out_features=F, tokens=seq))
        L.append(dict(name=f"{p}.intermediate.gelu", kind="gelu", shape=[seq, F]))
        L.append(dict(name=f"{p}.output.dense", kind="linear", in_features=F, out_features=H,
                      tokens=seq))
        L.append(dict(name=f"{p}.output.add", kind="add", shape=[seq, H]))
        L.append(dict(name=f"{p}.output.LayerNorm", kind="layernorm", shape=[seq, H]))
    L.append(dict(name="pooler.dense", kind="linear", in_features=H, out_features=H, tokens=1))
    L.append(dict(name="pooler.tanh", kind="tanh", shape=[H]))
    meta = dict(name="bert-base",
                description=f"BERT-base encoder with pooler (bert-base-uncased), sequence "
                            f"length {seq}; dropout and attention-mask add not modelled",
                source="HuggingFace transformers BertModel / Devlin et al. 2019 (L=12, H=768, "
                       "A=12, FFN 3072, vocab 30522)",
                published_params=109482240)
    return meta, L


def tiny_cnn() -> tuple[dict, list[dict]]:
    L = [
        dict(name="conv1", kind="conv", in_channels=3, out_channels=8, in_hw=[8, 8],
             kernel=[3, 3], stride=[1, 1], padding=[1, 1]),
        dict(name="bn1", kind="batchnorm", shape=[8, 8, 8]),
        dict(name="relu1", kind="relu", shape=[8, 8, 8]),
        dict(name="pool1", kind="maxpool", shape=[8, 8, 8], kernel=[2, 2], stride=[2, 2]),
        dict(name="conv2", kind="conv", in_channels=8, out_channels=16, in_hw=[4, 4],
             kernel=[3, 3], stride=[1, 1], padding=[1, 1], bias=True),
        dict(name="relu2", kind="relu", shape=[16, 4, 4]),
        dict(name="avgpool", kind="avgpool", shape=[16, 4, 4], kernel=[4, 4], stride=[1, 1]),
        dict(name="fc", kind="linear", in_features=16, out_features=10),
        dict(name="loss.softmax", kind="softmax", shape=[10]),
    ]
    meta = dict(name="tiny-cnn", description="A 2-conv test network on 3x8x8 inputs",
                source="accelsim test network (hand-checkable shapes)", published_params=1570)
    return meta, L


def digits_cnn() -> tuple[dict, list[dict]]:
    w, w2, hw = 8, 16, [8, 8]

    def conv(name, cin, cout, k, bias=False):  # the study's Conv2d has no bias
        return dict(name=name, kind="conv", in_channels=cin, out_channels=cout, in_hw=hw,
                    kernel=[k, k], stride=[1, 1], padding=[k // 2, k // 2], bias=bias)

    L = [
        conv("conv1", 1, w, 3), dict(name="bn1", kind="batchnorm", shape=[w, 8, 8]),
        dict(name="relu1", kind="relu", shape=[w, 8, 8]),
        conv("block.conv1", w, w2, 3), dict(name="block.bn1", kind="batchnorm", shape=[w2, 8, 8]),
        dict(name="block.relu", kind="relu", shape=[w2, 8, 8]),
        conv("block.conv2", w2, w2, 3), dict(name="block.bn2", kind="batchnorm", shape=[w2, 8, 8]),
        conv("block.shortcut", w, w2, 1),
        dict(name="block.shortcut.bn", kind="batchnorm", shape=[w2, 8, 8]),
        dict(name="block.add", kind="add", shape=[w2, 8, 8]),
        dict(name="relu2", kind="relu", shape=[w2, 8, 8]),
        dict(name="avgpool", kind="avgpool", shape=[w2, 8, 8], kernel=[2, 2], stride=[2, 2]),
        dict(name="fc", kind="linear", in_features=w2 * 4 * 4, out_features=10),
        dict(name="loss.softmax", kind="softmax", shape=[10]),
    ]
    meta = dict(name="digits-cnn", description="accelsim.train.models.cnn on 8x8 digits "
                "(study --model cnn --dataset digits)",
                source="accelsim.train.models.cnn(8, 8, 10), width 8", published_params=6338)
    return meta, L


HEADER = ("# GENERATED by scripts/workload_generate.py -- explicit layer list, one [[layer]] per\n"
          "# layer; edit the script and re-run it rather than editing by hand.\n# {doc}\n")

WORKLOADS = {
    "resnet50": (resnet50, "torchvision ResNet-50, 224x224 ImageNet; parameters 25,557,032 "
                           "(torchvision docs)"),
    "bert-base": (bert_base, "BERT-base (bert-base-uncased BertModel incl. pooler), seq 128; "
                             "parameters 109,482,240 (HuggingFace num_parameters())"),
    "tiny-cnn": (tiny_cnn, "small test network; parameters counted by hand"),
    "digits-cnn": (digits_cnn, "the study's digits CNN (accelsim.train.models.cnn); parameters "
                               "its parameters() count"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "workloads",
                    help="directory for the TOML files (default: workloads/)")
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if any committed file differs from the generator")
    args = ap.parse_args(argv)
    stale = []
    for name, (fn, doc) in WORKLOADS.items():
        meta, layers = fn()
        text = _render(meta, layers, HEADER.format(doc=doc))
        path = args.out / f"{name}.toml"
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path))
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path} ({len(layers)} layers)")
    if stale:
        print("stale: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
