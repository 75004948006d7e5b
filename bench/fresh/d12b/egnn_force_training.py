# expect-cause: shared-forward
import torch
from torch import nn

torch.manual_seed(0)
num_species, hidden, n_atoms = 4, 16, 5


class EGCL(nn.Module):
    """E(n)-equivariant graph convolutional layer (Satorras et al.)."""
    def __init__(self, h):
        super().__init__()
        self.edge_mlp = nn.Sequential(nn.Linear(2 * h + 1, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU())
        self.node_mlp = nn.Sequential(nn.Linear(2 * h, h), nn.SiLU(), nn.Linear(h, h))
        self.coord_mlp = nn.Sequential(nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1, bias=False))

    def forward(self, h, x):
        rij = x.unsqueeze(2) - x.unsqueeze(1)                       # (B, N, N, 3)
        d2 = rij.pow(2).sum(-1, keepdim=True)
        hi = h.unsqueeze(2).expand(-1, -1, h.shape[1], -1)
        m = self.edge_mlp(torch.cat([hi, hi.transpose(1, 2), d2], -1))
        x = x + (rij * self.coord_mlp(m)).mean(2)
        h = h + self.node_mlp(torch.cat([h, m.sum(2)], -1))
        return h, x


class EGNNPotential(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(num_species, hidden)
        self.layers = nn.ModuleList([EGCL(hidden) for _ in range(3)])
        self.readout = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, species_coordinates):
        species, coordinates = species_coordinates
        h, x = self.embed(species), coordinates
        for layer in self.layers:
            h, x = layer(h, x)
        return species, self.readout(h).sum((1, 2))


model = EGNNPotential()
weights = [p for n, p in model.named_parameters() if not n.endswith('bias')]
biases = [p for n, p in model.named_parameters() if n.endswith('bias')]
AdamW = torch.optim.AdamW(weights, lr=1e-3)
SGD = torch.optim.SGD(biases, lr=1e-3)
mse = nn.MSELoss(reduction='none')
force_coefficient = 0.1

for epoch in range(2):
    for _ in range(2):
        species = torch.randint(0, num_species, (8, n_atoms))
        coordinates = torch.randn(8, n_atoms, 3)
        true_energies, true_forces = torch.randn(8), torch.randn(8, n_atoms, 3)
        num_atoms = torch.full((8,), float(n_atoms))

        coordinates.requires_grad_(True)
        _, predicted_energies = model((species, coordinates))  # expect: forward
        forces = -torch.autograd.grad(predicted_energies.sum(), coordinates)[0]  # expect: frees
        energy_loss = (mse(predicted_energies, true_energies) / num_atoms.sqrt()).mean()
        force_loss = (mse(true_forces, forces).sum(dim=(1, 2)) / num_atoms).mean()
        loss = energy_loss + force_coefficient * force_loss

        AdamW.zero_grad()
        SGD.zero_grad()
        loss.backward()  # expect: raises
        AdamW.step()
        SGD.step()
    print('epoch', epoch, 'loss', loss.item())
