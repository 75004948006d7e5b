# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
VOCAB, EMB, NUM_LABELS, NUM_PROTECTED = 200, 32, 3, 2


class BagOfEmbeddingsClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedder = nn.EmbeddingBag(VOCAB, EMB, mode="mean")
        self.feedforward = nn.Sequential(nn.Linear(EMB, EMB), nn.Tanh())
        self.classifier = nn.Linear(EMB, NUM_LABELS)

    def forward(self, tokens):
        return self.classifier(self.feedforward(self.embedder(tokens)))  # expect: forward


class FeedForwardRegressionAdversary(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * NUM_LABELS, 16), nn.ReLU(), nn.Linear(16, NUM_PROTECTED))

    def forward(self, probs, label):
        return self.net(torch.cat([probs, F.one_hot(label, NUM_LABELS).float()], dim=-1))


class AdversarialBiasMitigator:
    def __init__(self, predictor, adversary, adversary_loss_weight=1.0):
        self.predictor, self.adversary = predictor, adversary
        self.adversary_loss_weight = adversary_loss_weight
        self.predictor_optimizer = torch.optim.Adam(predictor.parameters(), lr=1e-3)
        self.adversary_optimizer = torch.optim.Adam(adversary.parameters(), lr=1e-3)

    def train_step(self, tokens, label, protected):
        logits = self.predictor(tokens)
        probs = F.softmax(logits, dim=-1)
        predictor_loss = F.cross_entropy(logits, label)
        adversary_loss = F.cross_entropy(self.adversary(probs, label), protected)

        predictor_params = list(self.predictor.parameters())
        adversary_grads = torch.autograd.grad(adversary_loss, predictor_params)  # expect: frees
        self.predictor_optimizer.zero_grad()
        predictor_loss.backward()  # expect: raises
        for p, g_adv in zip(predictor_params, adversary_grads):
            unit_adv = g_adv / (g_adv.norm() + 1e-8)
            p.grad -= (p.grad * unit_adv).sum() * unit_adv + self.adversary_loss_weight * g_adv
        self.predictor_optimizer.step()

        self.adversary_optimizer.zero_grad()
        adv_update_loss = F.cross_entropy(self.adversary(probs.detach(), label), protected)
        adv_update_loss.backward()
        self.adversary_optimizer.step()
        return predictor_loss.item(), adv_update_loss.item()


tokens = torch.randint(0, VOCAB, (256, 12))
label = (tokens[:, 0] % NUM_LABELS)
protected = ((tokens[:, 0] + torch.randint(0, 2, (256,))) % NUM_PROTECTED)
mitigator = AdversarialBiasMitigator(BagOfEmbeddingsClassifier(), FeedForwardRegressionAdversary())
for epoch in range(3):
    for start in range(0, 256, 64):
        sl = slice(start, start + 64)
        p_loss, a_loss = mitigator.train_step(tokens[sl], label[sl], protected[sl])
    print(f"epoch {epoch} predictor {p_loss:.4f} adversary {a_loss:.4f}")
