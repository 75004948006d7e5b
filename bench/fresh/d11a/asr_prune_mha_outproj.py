# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.prune as prune

torch.manual_seed(0)
N_MELS, D_MODEL, N_TOKENS, N_LAYERS = 20, 32, 12, 2


class SelfAttention(nn.Module):
    def __init__(self, d_model, nhead):
        super().__init__()
        self.att = nn.MultiheadAttention(embed_dim=d_model, num_heads=nhead, batch_first=True)

    def forward(self, x):
        out, _ = self.att(x, x, x)
        return out


class EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead=2, d_ffn=64):
        super().__init__()
        self.self_att = SelfAttention(d_model, nhead)
        self.pos_ffn = nn.Sequential(nn.Linear(d_model, d_ffn), nn.ReLU(), nn.Linear(d_ffn, d_model))
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def forward(self, x):
        x = self.norm1(x + self.self_att(x))
        return self.norm2(x + self.pos_ffn(x))


class TransformerASR(nn.Module):
    def __init__(self):
        super().__init__()
        self.CNN = nn.Sequential(nn.Conv2d(1, 4, 3, stride=(2, 1), padding=1), nn.ReLU())
        self.proj = nn.Linear(4 * N_MELS, D_MODEL)
        self.encoder = nn.ModuleList([EncoderLayer(D_MODEL) for _ in range(N_LAYERS)])
        self.ctc_lin = nn.Linear(D_MODEL, N_TOKENS)

    def forward(self, feats):
        x = self.CNN(feats.unsqueeze(1))
        x = self.proj(x.permute(0, 2, 1, 3).flatten(2))
        for layer in self.encoder:
            x = layer(x)
        return self.ctc_lin(x).log_softmax(-1)


class ASR:
    def __init__(self, modules, px=0.3):
        self.modules, self.px = modules, px
        self.optimizer = torch.optim.Adam(modules.parameters(), lr=1e-3)

    def prune_model(self, px):
        parameters_to_prune = [(m, "weight") for m in self.modules.CNN.modules() if isinstance(m, nn.Conv2d)]
        for layer in self.modules.encoder:
            parameters_to_prune.append((layer.self_att.att, "in_proj_weight"))
            parameters_to_prune.append((layer.self_att.att.out_proj, "weight"))
            parameters_to_prune.append((layer.pos_ffn[0], "weight"))
            parameters_to_prune.append((layer.pos_ffn[2], "weight"))
        prune.global_unstructured(parameters_to_prune, pruning_method=prune.L1Unstructured, amount=px)  # expect: forward

    def on_fit_start(self):
        self.prune_model(self.px)

    def fit_batch(self, feats, tokens, feat_lens, token_lens):
        log_probs = self.modules(feats)
        loss = F.ctc_loss(log_probs.transpose(0, 1), tokens, feat_lens // 2, token_lens, blank=0)
        loss.backward()  # expect: raises frees
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.detach()

    def fit(self, epochs, train_set):
        self.on_fit_start()
        for epoch in range(epochs):
            for feats, tokens, feat_lens, token_lens in train_set:
                loss = self.fit_batch(feats, tokens, feat_lens, token_lens)
            print(f"epoch {epoch} ctc loss {loss.item():.3f}")


train_set = [(torch.randn(4, 40, N_MELS), torch.randint(1, N_TOKENS, (4, 6)),
              torch.full((4,), 40, dtype=torch.long), torch.full((4,), 6, dtype=torch.long)) for _ in range(2)]
asr_brain = ASR(TransformerASR())
asr_brain.fit(2, train_set)
